"""A real Prometheus (Debian's `prometheus` package) on loopback: it scrapes the given
ports (every second unless told otherwise) under target labels of our choosing (as a
ServiceMonitor would label them), loads rule groups, and answers PromQL over its HTTP
API. With a bearer token, it scrapes over HTTPS as the chart's ServiceMonitor does by
default: the token sent, the certificate verified as its `tlsConfig` says. `scraping`
points one at a running operator, for the tests and hack/render_dashboard.py alike."""

import json
import os
import shutil
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Self

import yaml

from devcluster.hostoperator import HostOperator
from devcluster.layout import HOST, free_port
from devcluster.process import Process

BINARY = shutil.which("prometheus")
MISSING = "no prometheus binary: install Debian's `prometheus` package (hack/setup-host.sh does)"
READY_SECONDS = 60.0


class Prometheus:
    def __init__(
        self,
        directory: Path,
        targets: dict[str, int],
        labels: dict[str, str],
        rule_groups: Sequence[dict[str, Any]] = (),
        scrape_interval: str = "1s",
        bearer_token: str | None = None,
        tls_config: dict[str, Any] | None = None,
    ) -> None:
        assert BINARY is not None, MISSING
        self.directory = directory
        self.port = free_port()
        self.scrape_interval = scrape_interval
        self._targets, self._labels, self._groups = targets, labels, list(rule_groups)
        self._bearer_token, self._tls_config = bearer_token, tls_config or {}
        self._process: Process | None = None

    def start(self) -> Self:
        self.directory.mkdir(parents=True, exist_ok=True)
        rules = self.directory / "rules.yaml"
        rules.write_text(yaml.safe_dump({"groups": self._groups}))
        secure: dict[str, Any] = {}
        if self._bearer_token is not None:
            token = self.directory / "token"
            token.write_text(self._bearer_token)
            secure = {
                "scheme": "https",
                "authorization": {"type": "Bearer", "credentials_file": str(token)},
                "tls_config": self._tls_config,
            }
        config = {
            "global": {
                "scrape_interval": self.scrape_interval,
                "evaluation_interval": self.scrape_interval,
            },
            "rule_files": [str(rules)],
            "scrape_configs": [
                {
                    "job_name": job,
                    "static_configs": [{"targets": [f"{HOST}:{port}"], "labels": self._labels}],
                    **secure,
                }
                for job, port in self._targets.items()
            ],
        }
        path = self.directory / "prometheus.yml"
        path.write_text(yaml.safe_dump(config))
        self._process = Process(
            "prometheus",
            [
                str(BINARY),
                f"--config.file={path}",
                f"--storage.tsdb.path={self.directory / 'data'}",
                f"--web.listen-address={HOST}:{self.port}",
            ],
            self.directory / "prometheus.log",
            dict(os.environ),
        )
        self._process.start()
        deadline = time.monotonic() + READY_SECONDS
        while not self._ready():
            if time.monotonic() > deadline or self._process.exit_code() is not None:
                raise RuntimeError(f"prometheus not ready:\n{self.log()[-3000:]}")
            time.sleep(0.2)
        return self

    def stop(self) -> None:
        if self._process is not None:
            self._process.terminate()
            self._process.kill(10.0)
            self._process = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    def log(self) -> str:
        path = self.directory / "prometheus.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://{HOST}:{self.port}/-/ready", timeout=2) as answer:
                return bool(answer.status == 200)
        except OSError:
            return False

    def api(self, path: str, **params: str) -> Any:
        """The `data` of an API answer; an error answer fails with Prometheus' message."""
        url = f"http://{HOST}:{self.port}/api/v1/{path}?{urllib.parse.urlencode(params)}"
        try:
            with urllib.request.urlopen(url, timeout=10) as answer:
                body = json.loads(answer.read())
        except urllib.error.HTTPError as error:
            body = json.loads(error.read())
        assert body["status"] == "success", f"{path} {params}: {body.get('error')}"
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """An instant query's result: [{"metric": labels, "value": [time, "value"]}]."""
        data = self.api("query", query=expr)
        result: list[dict[str, Any]] = data["result"] if data["resultType"] == "vector" else []
        return result

    def query_range(self, expr: str, start: float, end: float, step: float) -> list[dict[str, Any]]:
        """A range query's result: [{"metric": labels, "values": [[time, "value"], ...]}]."""
        data = self.api("query_range", query=expr, start=str(start), end=str(end), step=str(step))
        result: list[dict[str, Any]] = data["result"]
        return result

    def series(self, name: str) -> list[dict[str, str]]:
        """Series of `name` seen over the last 10 minutes."""
        start = str(time.time() - 600)
        found: list[dict[str, str]] = self.api("series", **{"match[]": name, "start": start})
        return found


def scraping(
    operator: HostOperator,
    directory: Path,
    rule_groups: Sequence[dict[str, Any]] = (),
    scrape_interval: str = "1s",
) -> Prometheus:
    """A Prometheus scraping both programs of a host operator as the chart's
    ServiceMonitor would: each program's metrics endpoint, labelled with the release
    namespace. The one place that knows where and how the operator serves /metrics."""
    targets = {
        "controller": operator.controller_metrics_port,
        "webhook": operator.webhook_metrics_port,
    }
    labels = {"namespace": operator.namespace}
    # Over HTTPS with a token bound to the chart's metrics-viewer role, verifying the
    # certificate as the chart's ServiceMonitor does, unless the operator serves plain HTTP.
    if not operator.metrics_secure:
        return Prometheus(directory, targets, labels, rule_groups, scrape_interval)
    directory.mkdir(parents=True, exist_ok=True)
    token = operator.token(operator.metrics_reader)
    tls = operator.scrape_tls(directory)
    return Prometheus(directory, targets, labels, rule_groups, scrape_interval, token, tls)
