"""The controller against kube-apiserver's own overload answers (ADR 0038).

API Priority and Fairness puts the controller's Deployment applies in a priority level
with no seat of its own and none to borrow (nominalConcurrencyShares 0), and no queue.
Such a level still admits a request while none of its requests executes, so a blocker
keeps one executing: a ConfigMap create whose admission webhook never answers, for up
to its 30 s timeout. Meanwhile kube-apiserver answers each apply 429 with Retry-After,
exactly as when the controller's priority level is overloaded, while the controller's
other requests pass, so a report (a status write, a Warning Event) would get through.
The controller runs as a ServiceAccount: the admin's `system:masters` requests are
exempt from API Priority and Fairness.
"""

import itertools
import json
import socket
import threading
from collections import defaultdict
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from devcluster import ControlPlane
from devcluster.controller_harness import (
    Obj,
    apply,
    audit_entries,
    events,
    now,
    running_controller,
    runtime_manifest,
    scoped,
    wait_condition,
    wait_for,
)
from devcluster.hostoperator import install_crds
from tests.support.host_programs import token_kubeconfig

pytestmark = pytest.mark.api
FLOWCONTROL = "flowcontrol.apiserver.k8s.io/v1"
RUNTIMES = 3
REFUSALS = 3  # per Deployment, within the blocker's 30 s
BLOCKER = "blocker"


@pytest.fixture(autouse=True)
def crd(plane: ControlPlane) -> None:
    install_crds(plane)


def jail(name: str, namespace: str, controller: str, blocker: str) -> list[Obj]:
    """A priority level that rejects whatever comes while one of its requests executes,
    and the FlowSchema sending it the controller's Deployment patches and the blocker's
    ConfigMap creates in `namespace`."""
    level = {
        "apiVersion": FLOWCONTROL,
        "kind": "PriorityLevelConfiguration",
        "metadata": {"name": name},
        "spec": {
            "type": "Limited",
            "limited": {
                "nominalConcurrencyShares": 0,
                "lendablePercent": 0,
                "borrowingLimitPercent": 0,
                "limitResponse": {"type": "Reject"},
            },
        },
    }
    subjects = [
        {"kind": "ServiceAccount", "serviceAccount": {"name": account, "namespace": namespace}}
        for account in (controller, blocker)
    ]
    resources = [
        {"verbs": ["patch"], "apiGroups": ["apps"], "resources": ["deployments"]},
        {"verbs": ["create"], "apiGroups": [""], "resources": ["configmaps"]},
    ]
    schema = {
        "apiVersion": FLOWCONTROL,
        "kind": "FlowSchema",
        "metadata": {"name": name},
        "spec": {
            "priorityLevelConfiguration": {"name": name},
            # Ahead of every suggested FlowSchema a ServiceAccount's request can match.
            "matchingPrecedence": 50,
            "rules": [
                {
                    "subjects": subjects,
                    "resourceRules": [r | {"namespaces": [namespace]} for r in resources],
                }
            ],
        },
    }
    return [level, schema]


def hanging_hook(name: str, namespace: str, port: int) -> Obj:
    """A webhook on the blocker's ConfigMap only, at an address that never answers."""
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [
            {
                "name": "hang.overload-test.trussium.invalid",
                "clientConfig": {"url": f"https://127.0.0.1:{port}/hang"},
                "rules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE"],
                        "resources": ["configmaps"],
                    }
                ],
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
                "objectSelector": {"matchLabels": {"overload-test": BLOCKER}},
                "failurePolicy": "Ignore",
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
                "timeoutSeconds": 30,
            }
        ],
    }


class Silent:
    """A listener that accepts and never answers, until closed."""

    def __init__(self) -> None:
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._server.getsockname()[1]
        self.called = threading.Event()
        self._held: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self._server.accept()
            except OSError:
                return  # closed
            self._held.append(connection)
            self.called.set()

    def close(self) -> None:
        self._server.close()
        for connection in self._held:
            connection.close()


def in_force(plane: ControlPlane, name: str) -> bool:
    """The API server has read the FlowSchema and found its priority level."""
    schema = json.loads(plane.kubectl("get", "flowschema", name, "-o", "json").stdout)
    conditions = (schema.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Dangling" and c.get("status") == "False" for c in conditions)


def received(entry: Obj) -> datetime:
    return datetime.fromisoformat(str(entry["requestReceivedTimestamp"]).replace("Z", "+00:00"))


def code(entry: Obj) -> int:
    return int((entry.get("responseStatus") or {}).get("code") or 0)


def refused_applies(entries: list[Obj]) -> dict[str, list[datetime]]:
    """When each Deployment's apply was answered 429, per Deployment."""
    refused: dict[str, list[datetime]] = defaultdict(list)
    for entry in entries:
        ref: dict[str, Any] = entry.get("objectRef") or {}
        patch = entry.get("verb") == "patch" and ref.get("resource") == "deployments"
        if patch and code(entry) == 429:
            refused[str(ref.get("name"))].append(received(entry))
    return {name: sorted(times) for name, times in refused.items()}


def status_writes(entries: list[Obj]) -> dict[str, int]:
    writes: dict[str, int] = defaultdict(int)
    for entry in entries:
        ref: dict[str, Any] = entry.get("objectRef") or {}
        if (
            entry.get("verb") in ("update", "patch")
            and ref.get("resource") == "trussiumruntimes"
            and ref.get("subresource") == "status"
            and code(entry) < 300
        ):
            writes[str(ref.get("name"))] += 1
    return dict(writes)


def test_throttled_applies_wait_retry_after_and_report_nothing(
    plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    controller, name = "overloaded", f"{namespace}-jail"
    for account in (controller, BLOCKER):
        plane.kubectl("create", "serviceaccount", account, "-n", namespace)
    plane.kubectl(
        "create", "clusterrolebinding", name, "--clusterrole=cluster-admin",
        f"--serviceaccount={namespace}:{controller}",
        f"--serviceaccount={namespace}:{BLOCKER}",
    )  # fmt: skip
    hook = Silent()
    items = [*jail(name, namespace, controller, BLOCKER), hanging_hook(name, namespace, hook.port)]
    plane.kubectl(
        "apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": items})
    )
    names = [f"rt-{i}" for i in range(RUNTIMES)]
    blocker_config = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": BLOCKER, "labels": {"overload-test": BLOCKER}},
    }
    blocking: threading.Thread | None = None
    try:
        wait_for(lambda: in_force(plane, name), "the FlowSchema in force")
        with running_controller(
            plane,
            tmp_path / "controller.log",
            f"--kubeconfig={token_kubeconfig(plane, namespace, controller)}",
            *scoped(namespace),
        ):
            as_blocker = token_kubeconfig(plane, namespace, BLOCKER)
            blocking = threading.Thread(
                target=plane.kubectl,
                args=("create", "-n", namespace, "-f", "-"),
                kwargs={"input": json.dumps(blocker_config), "kubeconfig": as_blocker},
            )
            blocking.start()
            assert hook.called.wait(30), "the blocker's admission reached the hook"
            since = now()
            for runtime in names:
                apply(plane, runtime_manifest(runtime, namespace))

            def overloaded() -> dict[str, list[datetime]] | None:
                refused = refused_applies(audit_entries(plane, since))
                enough = len(refused) == RUNTIMES and all(
                    len(times) >= REFUSALS for times in refused.values()
                )
                return refused if enough else None

            wait_for(overloaded, f"{REFUSALS} refused applies of each Deployment", timeout=25)
            until = now()
            entries = audit_entries(plane, since, until)
            refused = refused_applies(entries)
            warnings = [
                (runtime, e["note"])
                for runtime in names
                for e in events(plane, namespace, runtime)
                if e["type"] == "Warning"
            ]
            hook.close()  # the blocker's admission goes on without the hook: the overload ends
            plane.kubectl("delete", "flowschema", name)

            gaps = {
                runtime: [(b - a).total_seconds() for a, b in itertools.pairwise(times)]
                for runtime, times in refused.items()
            }
            writes = status_writes(entries)
            print(
                f"\nOVERLOAD-RESULT over {(until - since).total_seconds():.1f}s, per runtime:"
                f" refused applies { {n: len(t) for n, t in refused.items()} },"
                f" status writes {writes}, Warning Events {len(warnings)}; gaps (s) {gaps}"
            )
            # kube-apiserver's Retry-After is at least 1 s: no retry came sooner.
            assert min(min(g) for g in gaps.values()) >= 0.99, gaps
            assert writes == {}, "a status write while throttled"
            assert warnings == [], "a Warning Event while throttled"
            for runtime in names:  # and once the overload is over, the runtimes converge
                wait_condition(
                    plane, runtime, namespace, "Progressing", "True", "DeploymentGenerationPending"
                )
    finally:
        hook.close()
        if blocking is not None:
            blocking.join(60)
        for kind in (
            "validatingwebhookconfiguration",
            "flowschema",
            "prioritylevelconfiguration",
            "clusterrolebinding",
        ):
            plane.kubectl("delete", kind, name, "--ignore-not-found")
