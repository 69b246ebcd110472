"""Running `trussium-controller` against the local control plane, and reading the result.

The controller runs as a real subprocess (signals, leader election, user
agent and memory are then those of production); tests observe it only
through the API server and its audit log, as a user would.
"""

import json
import os
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from devcluster import ControlPlane, barriers, polling
from devcluster.layout import free_port
from trussium_operator.common.api import TrussiumRuntime
from trussium_operator.common.conditions import conditions_of, find_condition
from trussium_operator.common.defaulting import apply_defaults
from trussium_operator.controller.runtime.kinds import enabled_kinds

USER_AGENT_PREFIX = "trussium-operator/"
IMAGE = "ghcr.io/trussium/runtime"
WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})

T = TypeVar("T")
Obj = dict[str, Any]


def wait_for(check: Callable[[], T | None], what: str, timeout: float = 90.0) -> T:
    """Poll `check` until it returns something truthy; fail naming `what` on timeout."""
    return polling.wait_for(check, what, timeout)


def sample_sum(exposition: str, name: str, **labels: str) -> float:
    """Sum of the samples of `name` matching `labels` in a Prometheus text exposition."""
    total = 0.0
    for line in exposition.splitlines():
        sample = line.startswith(name + "{") or line.startswith(name + " ")
        if sample and all(f'{k}="{v}"' in line for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


class Controller:
    """One `trussium-controller run` subprocess; logs go to a file for failure reports."""

    def __init__(
        self, plane: ControlPlane, log_path: Path, *args: str, identity: str = "test-controller"
    ) -> None:
        self.identity = identity
        self.health_port = free_port()
        self.metrics_port = free_port()
        self.log_path = log_path
        argv = [
            str(Path(sys.executable).parent / "trussium-controller"),
            "run",
            f"--kubeconfig={plane.kubeconfig}",
            f"--identity={identity}",
            f"--health-probe-bind-address=127.0.0.1:{self.health_port}",
            f"--metrics-bind-address=127.0.0.1:{self.metrics_port}",
            # Plain HTTP, asked for: the barriers scrape it as the admin, who has no
            # token (tests/apiserver/test_metrics_auth.py covers the secure default).
            "--metrics-secure=false",
            *args,
        ]
        env = {k: v for k, v in os.environ.items() if not k.startswith("TRUSSIUM_")}
        with log_path.open("ab") as log:
            self.process = subprocess.Popen(argv, stdout=log, stderr=log, env=env)

    @property
    def pid(self) -> int:
        return self.process.pid

    def _get(self, port: int, path: str, timeout: float = 2) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(
                f"http://127.0.0.1:{port}{path}", timeout=timeout
            ) as answer:
                return answer.status, answer.read().decode()
        except OSError:
            return 0, ""

    def wait_ready(self, timeout: float = 60.0) -> None:
        def ready() -> bool:
            if self.process.poll() is not None:
                raise AssertionError(f"controller exited {self.process.returncode}: {self.logs()}")
            return self._get(self.health_port, "/readyz")[0] == 200

        wait_for(ready, f"controller {self.identity} ready", timeout)

    def scrape(self) -> str:
        """The /metrics text; a failed scrape fails the test (it must not read as idle)."""
        # Thousands of runtimes' series take seconds to render on a loaded machine.
        status, text = self._get(self.metrics_port, "/metrics", timeout=30)
        if status != 200:
            raise AssertionError(f"cannot scrape controller {self.identity}: {status}")
        return text

    def wait_quiescent(self, interval: float = 1.0, timeout: float = 60.0) -> None:
        """Until every change the controller was told of is handled (devcluster/barriers.py)."""
        barriers.wait_quiescent(self.scrape, interval, timeout)

    def metric(self, name: str, **labels: str) -> float:
        """Sum of the samples of `name` matching `labels` (0 when absent, or while the
        metrics server does not answer: polls may start before it listens)."""
        return sample_sum(self._get(self.metrics_port, "/metrics", timeout=30)[1], name, **labels)

    def signal(self, signum: signal.Signals) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signum)

    def stop(self, timeout: float = 40.0) -> int:
        self.signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()

    def logs(self) -> str:
        return self.log_path.read_text(errors="replace")[-6000:]


@contextmanager
def running_controller(
    plane: ControlPlane, log_path: Path, *args: str, identity: str = "test-controller"
) -> Iterator[Controller]:
    controller = Controller(plane, log_path, *args, identity=identity)
    try:
        controller.wait_ready()
        yield controller
    except BaseException:
        sys.stderr.write(f"--- controller {identity} log ---\n{controller.logs()}\n")
        raise
    finally:
        controller.stop()


def scoped(namespace: str) -> tuple[str, str]:
    """Flags confining a controller, and its Lease, to one test namespace."""
    return f"--watch-namespace={namespace}", f"--leader-election-namespace={namespace}"


def runtime_manifest(name: str, namespace: str, **spec: Any) -> Obj:
    body: Obj = {
        "image": {"repository": IMAGE, "tag": "1.0.0"},
        "provider": {"type": "ollama", "model": "m", "baseURL": "http://127.0.0.1:11434/v1"},
    }
    body.update(spec)
    return {
        "apiVersion": "runtime.trussium.io/v1alpha1",
        "kind": "TrussiumRuntime",
        "metadata": {"name": name, "namespace": namespace},
        "spec": body,
    }


def managed_kinds_of(manifest: Obj) -> tuple[str, ...]:
    """The kinds the controller manages for a runtime manifest, in apply order (from the
    kind registry, so a new kind needs no list of its own in the tests)."""
    parsed = TrussiumRuntime.model_validate(apply_defaults(manifest).object)
    return tuple(kind.kind for kind in enabled_kinds(parsed))


def apply(plane: ControlPlane, obj: Obj) -> None:
    plane.kubectl(
        "apply", "--server-side", "--field-manager=test", "-f", "-", input=json.dumps(obj)
    )


def patch_status(
    kubectl: Callable[..., object], kind: str, name: str, namespace: str, status: Obj
) -> None:
    """Write `status` over an object's status subresource (a merge patch), as its
    controller would."""
    kubectl(
        "patch",
        kind,
        name,
        "-n",
        namespace,
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps({"status": status}),
    )


def fill_pod_quota(plane: ControlPlane, namespace: str, pods: int) -> None:
    """A ResourceQuota of `pods` Pods, once it counts that many running: the next Pod
    (a rollout's surge Pod) is refused, and the Deployment reports ReplicaFailure."""
    name = f"pods-{pods}"
    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"hard": {"pods": str(pods)}},
    }
    apply(plane, quota)
    wait_for(
        lambda: (
            (must_get(plane, "resourcequota", name, namespace).get("status") or {})
            .get("used", {})
            .get("pods")
            == str(pods)
        ),
        f"the quota to count {pods} running pods",
    )


def get(plane: ControlPlane, kind: str, name: str, namespace: str) -> Obj | None:
    answer = plane.kubectl("get", kind, name, "-n", namespace, "-o", "json", check=False)
    if answer.returncode != 0:
        if "NotFound" in answer.stderr:
            return None
        raise AssertionError(answer.stderr)
    obj: Obj = json.loads(answer.stdout)
    return obj


def must_get(plane: ControlPlane, kind: str, name: str, namespace: str) -> Obj:
    obj = get(plane, kind, name, namespace)
    assert obj is not None, f"{kind} {namespace}/{name} does not exist"
    return obj


def condition(runtime: Obj | None, type_: str) -> tuple[str, str]:
    """(status, reason) of a condition, ("", "") when absent."""
    found = find_condition(conditions_of((runtime or {}).get("status")), type_) or {}
    return found.get("status", ""), found.get("reason", "")


def wait_condition(
    plane: ControlPlane,
    name: str,
    namespace: str,
    type_: str,
    status: str,
    reason: str,
    timeout: float = 90.0,
) -> Obj:
    def check() -> Obj | None:
        runtime = get(plane, "trussiumruntime", name, namespace)
        return runtime if condition(runtime, type_) == (status, reason) else None

    return wait_for(check, f"{namespace}/{name} {type_}={status} {reason}", timeout)


def events(plane: ControlPlane, namespace: str, name: str) -> list[Obj]:
    """The controller's events.k8s.io Events about runtime `name`, oldest first."""
    answer = plane.kubectl("get", "events.v1.events.k8s.io", "-n", namespace, "-o", "json")
    items = [
        e
        for e in json.loads(answer.stdout)["items"]
        if e.get("regarding", {}).get("name") == name
        and e.get("reportingController") == "trussium-operator"
    ]
    return sorted(items, key=lambda e: str(e.get("eventTime")))


def reasons(plane: ControlPlane, namespace: str, name: str) -> list[str]:
    return [e["reason"] for e in events(plane, namespace, name)]


def audit_entries(plane: ControlPlane, since: datetime, until: datetime | None = None) -> list[Obj]:
    """The controller's completed requests between `since` and `until` (audit log)."""
    entries = []
    with plane.audit_log.open() as log:
        for line in log:
            entry = json.loads(line)
            if not str(entry.get("userAgent", "")).startswith(USER_AGENT_PREFIX):
                continue
            at = datetime.fromisoformat(entry["requestReceivedTimestamp"].replace("Z", "+00:00"))
            if at >= since and (until is None or at <= until):
                entries.append(entry)
    return entries


def writes(entries: list[Obj], *, include_leases: bool = False) -> list[str]:
    return [
        f"{e['verb']} {e.get('requestURI')}"
        for e in entries
        if e.get("verb") in WRITE_VERBS
        and (include_leases or e.get("objectRef", {}).get("resource") != "leases")
    ]


def lease_renewals(entries: list[Obj]) -> int:
    return sum(
        1
        for e in entries
        if e.get("verb") == "update" and e.get("objectRef", {}).get("resource") == "leases"
    )


def now() -> datetime:
    return datetime.now(UTC)
