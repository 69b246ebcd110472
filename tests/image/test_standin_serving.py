"""The stand-in serving as the runtime serves: chat completions through its
provider, readiness gated on that provider only when asked, the runtime's
request metrics, and the chart's runtime alerts and panels evaluated over them by
a real Prometheus. Both run as plain processes on loopback: the stand-in fed
the environment the operator renders, and the provider stub
(`trussium-standin provider`) as its provider."""

import hashlib
import json
import math
import signal
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from devcluster import ControlPlane
from devcluster.layout import free_port
from devcluster.polling import wait_for
from devcluster.prometheus import BINARY as PROMETHEUS
from devcluster.prometheus import MISSING, Prometheus
from hack.dashboard import load, queries
from tests.image.standin import (
    API_KEY,
    as_runtime_user,
    example,
    get,
    local,
    rendered_environment,
    run,
    serving,
)
from tests.support.chart import find, fullname, release_name, render
from tests.support.chat import chat
from trussium_operator.common import constants as c

EXIT_TIMEOUT_SECONDS = 15
START_SECONDS = 10
# The provider's models; the examples' ollama model is among them.
MODELS = "llama3.2,gpt-4o-mini"
CHECKS, CACHE = c.ENV_DEPENDENCY_CHECKS, c.ENV_DEPENDENCY_CACHE
REQUIRED_MODEL, METRICS = c.ENV_REQUIRED_MODEL, c.ENV_METRICS
# Short enough that a readiness test waits on it, not on a fixed sleep.
SHORT_CACHE = "0.2"
# Far longer than any test: a cached result can only be this one.
LONG_CACHE = "3600"


def key_digest(key: str) -> str:
    return "sha256:" + hashlib.sha256(key.encode()).hexdigest()


def fetch(url: str, method: str = "GET") -> tuple[int, str]:
    request = urllib.request.Request(url, method=method)
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


class Stub:
    """The provider stub on a loopback port."""

    def __init__(self, port: int) -> None:
        self.url = f"http://127.0.0.1:{port}"

    def fail(self, status: int) -> None:
        assert fetch(f"{self.url}/stub/fail?status={status}", "POST")[0] == 200

    def requests(self) -> list[dict[str, Any]]:
        seen: list[dict[str, Any]] = json.loads(fetch(f"{self.url}/stub/requests")[1])["requests"]
        return seen


@pytest.fixture
def stub(standin: Path) -> Iterator[Stub]:
    port = free_port()
    process = run(standin, {}, "provider", f"--listen=127.0.0.1:{port}", f"--models={MODELS}")
    stub = Stub(port)

    def live() -> bool:
        if process.poll() is not None:
            pytest.fail(f"the provider stub exited: {process.communicate()[1]}")
        try:
            return fetch(f"{stub.url}/stub/live")[0] == 200
        except OSError:
            return False

    try:
        wait_for(live, "the provider stub to serve", timeout=START_SECONDS)
        yield stub
    finally:
        process.kill()
        process.communicate(timeout=EXIT_TIMEOUT_SECONDS)


@contextmanager
def runtime(binary: Path, env: Mapping[str, str]) -> Iterator[str]:
    """The stand-in serving `env` on a free loopback port: its URL. Its log must
    not show the API key."""
    port = free_port()
    process = run(binary, local(env, port), "--allow-writable-root", **as_runtime_user())
    try:
        wait_for(lambda: serving(process, port), "the stand-in to serve", timeout=START_SECONDS)
        yield f"http://127.0.0.1:{port}"
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=EXIT_TIMEOUT_SECONDS)
    assert API_KEY not in stderr


def provided(example: str, stub: Stub, **extra: str) -> dict[str, str]:
    """The example's rendered environment, its provider the stub's /v1 API."""
    return rendered_environment(example) | {c.ENV_PROVIDER_BASE_URL: f"{stub.url}/v1"} | extra


def ready(url: str) -> tuple[int, dict[str, Any]]:
    return get(int(url.rsplit(":", 1)[1]), c.READY_PATH)


def test_a_chat_request_is_answered_through_the_providers_responses_api(
    standin: Path, stub: Stub
) -> None:
    with runtime(standin, provided("runtime.yaml", stub)) as url:
        answer = chat(url, "llama3.2", "hello there")
    assert answer["status"] == 200
    assert answer["body"] == {
        "id": "resp_1",
        "provider": "ollama",
        "model": "llama3.2",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "You said: hello there"},
                "finish_reason": "stop",
            }
        ],
        "usage": {"input_tokens": 2, "output_tokens": 4, "total_tokens": 6},
    }
    # Ollama without a key: the runtime's placeholder key, as the bearer.
    assert stub.requests() == [
        {
            "method": "POST",
            "path": "/v1/responses",
            "model": "llama3.2",
            "keySHA256": key_digest("ollama"),
        }
    ]


def test_a_streamed_chat_request_is_relayed_as_the_runtimes_events(
    standin: Path, stub: Stub
) -> None:
    with runtime(standin, provided("runtime-production.yaml", stub)) as url:
        answer = chat(url, "gpt-4o-mini", "hello there", stream=True)
    assert answer["status"] == 200
    assert answer["contentType"].startswith("text/event-stream")
    events = answer["events"]
    assert [e["event"] for e in events] == ["start", "delta", "delta", "delta", "delta", "end"]
    assert all(e["data"]["type"] == e["event"] for e in events)
    assert events[0]["data"] == {
        "type": "start",
        "id": "resp_1",
        "provider": "openai",
        "model": "gpt-4o-mini",
    }
    assert "".join(e["data"]["content"] for e in events[1:-1]) == "You said: hello there"
    assert events[-1]["data"] == {
        "type": "end",
        "id": "resp_1",
        "finish_reason": "stop",
        "usage": {"input_tokens": 2, "output_tokens": 4, "total_tokens": 6},
    }
    # The Secret's key is the bearer.
    assert [r["keySHA256"] for r in stub.requests()] == [key_digest(API_KEY)]
    assert stub.requests()[0]["stream"] is True


def test_a_provider_failure_is_the_runtimes_error_status_or_error_event(
    standin: Path, stub: Stub
) -> None:
    stub.fail(404)
    with runtime(standin, provided("runtime.yaml", stub)) as url:
        plain = chat(url, "llama3.2", "hello")
        streamed = chat(url, "llama3.2", "hello", stream=True)
    failure = {"code": "ollama_http_404", "message": "Ollama returned HTTP status 404."}
    assert (plain["status"], plain["body"]) == (502, {"detail": failure})
    assert streamed["status"] == 200
    assert streamed["events"] == [
        {"event": "error", "data": {"type": "error", "id": None, **failure}}
    ]


def test_a_5xx_is_retried_as_the_sdk_retries_it(standin: Path, stub: Stub) -> None:
    stub.fail(503)
    with runtime(standin, provided("runtime.yaml", stub)) as url:
        answer = chat(url, "llama3.2", "hello")
    assert answer["status"] == 502
    assert answer["body"]["detail"]["code"] == "ollama_http_503"
    assert len(stub.requests()) == 3  # the request and the SDK's two retries


def test_a_stopped_provider_is_a_connection_failure(standin: Path) -> None:
    gone = f"http://127.0.0.1:{free_port()}/v1"
    env = rendered_environment("runtime.yaml") | {c.ENV_PROVIDER_BASE_URL: gone}
    with runtime(standin, env) as url:
        answer = chat(url, "llama3.2", "hello")
    assert (answer["status"], answer["body"]) == (
        502,
        {
            "detail": {
                "code": "ollama_connection_failed",
                "message": "Trussium could not connect to Ollama.",
            }
        },
    )


def test_openai_without_a_key_has_no_chat_provider(standin: Path, stub: Stub) -> None:
    env = provided("runtime.yaml", stub, **{c.ENV_PROVIDER_NAME: "openai", CHECKS: "true"})
    with runtime(standin, env) as url:
        answer = chat(url, "gpt-4o-mini", "hello")
        readiness = ready(url)
    assert (answer["status"], answer["body"]["detail"]["code"]) == (
        503,
        "chat_capability_unavailable",
    )
    assert readiness == (
        503,
        {
            "status": "unavailable",
            "dependencies": [
                {
                    "name": "provider",
                    "status": "unavailable",
                    "provider": "openai",
                    "reason": "provider_not_configured",
                }
            ],
        },
    )
    assert stub.requests() == []


def test_without_dependency_checks_readiness_ignores_the_provider(
    standin: Path, stub: Stub
) -> None:
    stub.fail(500)
    with runtime(standin, provided("runtime.yaml", stub)) as url:
        assert ready(url) == (200, {"status": "ready"})
    assert stub.requests() == [], "readiness never asked the provider"


def test_with_dependency_checks_readiness_follows_the_provider(standin: Path, stub: Stub) -> None:
    env = provided("runtime.yaml", stub, **{CHECKS: "true", CACHE: SHORT_CACHE})
    ok = {"name": "provider", "status": "ok", "provider": "ollama"}
    with runtime(standin, env) as url:
        assert ready(url) == (200, {"status": "ok", "dependencies": [ok]})
        assert stub.requests()[-1]["path"] == "/v1/models"

        stub.fail(500)

        def unready() -> dict[str, Any] | None:
            status, answer = ready(url)
            return answer if status == 503 else None

        down = wait_for(unready, "readiness to fail", 10)
        stub.fail(0)
        wait_for(lambda: ready(url)[0] == 200, "readiness to recover", 10)
    # The SDK's retries of a 500 outlast the dependency timeout (1 s by default).
    assert down["dependencies"] == [{**ok, "status": "unavailable", "reason": "provider_timeout"}]


def test_a_required_model_the_provider_lacks_is_unready(standin: Path, stub: Stub) -> None:
    env = provided("runtime.yaml", stub, **{CHECKS: "true", REQUIRED_MODEL: " qwen2.5 "})
    with runtime(standin, env) as url:
        status, answer = ready(url)
    assert status == 503
    assert answer["dependencies"][0]["model"] == "qwen2.5"
    assert answer["dependencies"][0]["reason"] == "model_unavailable"
    assert [r["path"] for r in stub.requests()] == ["/v1/models/qwen2.5"]


def test_a_readiness_result_is_reused_for_the_cache_period(standin: Path, stub: Stub) -> None:
    env = provided("runtime.yaml", stub, **{CHECKS: "true", CACHE: LONG_CACHE})
    with runtime(standin, env) as url:
        assert ready(url)[0] == 200
        stub.fail(500)
        assert [ready(url)[0] for _ in range(3)] == [200, 200, 200]
    assert len(stub.requests()) == 1, "one check, then its cached result"


def metric_lines(url: str) -> list[str]:
    status, text = fetch(f"{url}/metrics")
    assert status == 200
    return [line for line in text.splitlines() if not line.startswith("#")]


def test_metrics_count_workload_requests_under_the_runtimes_names(
    standin: Path, stub: Stub
) -> None:
    with runtime(standin, provided("runtime.yaml", stub)) as url:
        assert ready(url)[0] == 200  # a probe: not counted
        chat(url, "llama3.2", "hello")
        chat(url, "llama3.2", "hello", stream=True)
        chat(url, "", "hello")
        lines = metric_lines(url)
    assert "trussium_http_requests_active 0.0" in lines
    assert (
        'trussium_http_requests_total{method="POST",outcome="completed",status_code="200"} 2.0'
        in lines
    )
    assert (
        'trussium_http_requests_total{method="POST",outcome="completed",status_code="422"} 1.0'
        in lines
    )
    assert [line for line in lines if "GET" in line] == []
    assert (
        'trussium_http_request_duration_seconds_count{method="POST",outcome="completed"} 3.0'
        in lines
    )


def test_metrics_can_be_turned_off(standin: Path, stub: Stub) -> None:
    with runtime(standin, provided("runtime.yaml", stub, **{METRICS: "false"})) as url:
        assert fetch(f"{url}/metrics")[0] == 404


def test_a_malformed_readiness_setting_stops_it(standin: Path) -> None:
    env = rendered_environment("runtime.yaml") | {CHECKS: "yes", CACHE: "-1"}
    process = run(standin, env, "--allow-writable-root", **as_runtime_user())
    _, stderr = process.communicate(timeout=EXIT_TIMEOUT_SECONDS)
    assert process.returncode == 1
    assert f"{CACHE}: must be a positive number of seconds" in stderr
    assert f"{CHECKS}: must be true or false" in stderr


def test_it_takes_every_runtime_setting_the_operator_may_render(standin: Path) -> None:
    manifest = example("runtime.yaml")
    manifest["spec"] |= {
        "readiness": {
            "dependencyChecks": False,
            "dependencyTimeoutSeconds": 0.5,
            "dependencyCacheSeconds": 10,
            "requiredModel": "llama3.2",
        },
        "reranking": {
            "baseURL": "http://tei.models:8080",
            "credentialsSecretRef": {"name": "tei", "key": "api-key"},
        },
        "observability": {
            "metrics": True,
            "tracing": {
                "enabled": True,
                "serviceName": "trussium",
                "sampleRatio": 0.25,
                "otlpEndpoint": "http://otel:4318/v1/traces",
                "exportTimeoutSeconds": 10,
            },
        },
        "runtime": {
            "serviceCleanupTimeoutSeconds": 10,
            "componentHealthTimeoutSeconds": 1,
            "capabilityAvailabilityTimeoutSeconds": 1,
            "capabilityHealthTimeoutSeconds": 1.5,
        },
    }
    env = rendered_environment(manifest)
    with runtime(standin, env) as url:
        status, config = get(int(url.rsplit(":", 1)[1]), "/standin/config")
    assert status == 200
    assert config["readiness"] == {
        "dependencyChecksEnabled": False,
        "dependencyTimeoutSeconds": 0.5,
        "dependencyCacheSeconds": 10,
        "requiredModel": "llama3.2",
    }
    assert config["metricsEnabled"] is True


RUNTIME_ALERTS = ("TrussiumRuntimeErrors", "TrussiumRuntimeSaturated")
# The target labels a runtime's PodMonitor gives its series (common.render).
SCRAPED_AS = {"namespace": "team", "runtime_namespace": "team", "runtime_name": "support"}


@pytest.mark.api
@pytest.mark.skipif(PROMETHEUS is None, reason=MISSING)
def test_the_charts_runtime_alerts_and_panels_read_the_scraped_runtime(
    plane: ControlPlane, standin: Path, stub: Stub, tmp_path: Path
) -> None:
    """A real Prometheus scrapes the stand-in as the runtime's PodMonitor labels it and
    evaluates the chart's runtime alerts: they load, the error ratio fires while the
    provider fails, and every runtime traffic panel of the dashboard has data."""
    release = release_name()
    immediate = "prometheusRule.alerts.TrussiumRuntimeErrors.for=0s"
    objects = render(
        plane, release, "ops", "--set", "prometheusRule.enabled=true", "--set", immediate
    )
    (group,) = find(objects, "PrometheusRule", fullname(release))["spec"]["groups"]
    rules = [rule for rule in group["rules"] if rule["alert"] in RUNTIME_ALERTS]
    assert [rule["alert"] for rule in rules] == list(RUNTIME_ALERTS)
    panels = [(title, expr) for title, expr in queries(load()) if "trussium_http_" in expr]
    assert len(panels) == 5

    with runtime(standin, provided("runtime-observed.yaml", stub)) as url:
        port = int(url.rsplit(":", 1)[1])
        groups = [{"name": "runtime", "rules": rules}]
        with Prometheus(tmp_path, {"support": port}, SCRAPED_AS, groups) as prom:

            def served(status: int) -> list[dict[str, Any]]:
                """One more request, then the alerts Prometheus holds firing."""
                assert chat(url, "llama3.2", "hello")["status"] == status
                return prom.query('ALERTS{alertstate="firing"}')

            # Served: two scrapes of a growing count, and nothing fires.
            wait_for(
                lambda: served(200) == [] and prom.query("count_over_time(up[1m]) >= 3"),
                "three scrapes of the serving runtime",
                timeout=30,
            )
            assert served(200) == []
            # Loaded and evaluated without an error.
            loaded = [r for g in prom.api("rules")["groups"] for r in g["rules"]]
            assert [(r["name"], r["health"]) for r in loaded] == [
                (alert, "ok") for alert in RUNTIME_ALERTS
            ]
            # The provider refuses every request: 502s, and the error ratio fires.
            stub.fail(401)
            (alert,) = wait_for(lambda: served(502), "the error ratio alert", timeout=60)
            assert alert["metric"]["alertname"] == "TrussiumRuntimeErrors"
            assert {k: alert["metric"][k] for k in ("runtime_namespace", "runtime_name")} == {
                "runtime_namespace": "team",
                "runtime_name": "support",
            }
            # Saturation reads the same target: its measure has a value, below the threshold.
            saturation = rules[1]["expr"].rpartition(">")[0]
            assert [s["metric"] for s in prom.query(saturation)] == [
                {"runtime_namespace": "team", "runtime_name": "support"}
            ]
            for title, expr in panels:
                values = [float(s["value"][1]) for s in prom.query(expr)]
                assert values, f"{title}: no data for {expr}"
                assert not any(math.isnan(v) for v in values), f"{title}: {values}"
