"""The controller never takes over what it does not own (docs/contract.md section 4,
"Ownership"), on a real API server: every managed kind, a name held by a tenant's
object, an orphan of the runtime's adopted, and provisioning once the name is free."""

import json
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from devcluster import ControlPlane
from devcluster.controller_harness import (
    apply,
    condition,
    events,
    get,
    must_get,
    running_controller,
    runtime_manifest,
    scoped,
    wait_condition,
    wait_for,
)
from devcluster.hostoperator import install_crds
from trussium_operator.common.render import operator_labels
from trussium_operator.controller.runtime.kinds import MANAGED_KINDS

pytestmark = pytest.mark.api
Obj = dict[str, Any]
BILLING = {"app": "billing"}
# Every kind enabled: autoscaling and the NetworkPolicy too.
EVERY_KIND = {
    "resources": {"requests": {"cpu": "100m"}},
    "autoscaling": {"enabled": True, "maxReplicas": 3},
    "networkPolicy": {"enabled": True, "ingress": [{"namespaceSelector": {}}]},
}


@pytest.fixture(autouse=True)
def crd(plane: ControlPlane) -> None:
    install_crds(plane)


def foreign(kind: str, name: str, namespace: str) -> Obj:
    """A tenant's object of `kind` under `name`, as a namespace already holds it."""
    api_version = next(k.resource.api_version for k in MANAGED_KINDS if k.kind == kind)
    meta: Obj = {"name": name, "namespace": namespace, "labels": BILLING}
    pods = {"matchLabels": BILLING}
    bodies: dict[str, Obj] = {
        "ConfigMap": {"data": {"billing.conf": "rate=3"}},
        "ServiceAccount": {},
        "Service": {"spec": {"selector": BILLING, "ports": [{"name": "web", "port": 80}]}},
        "Deployment": {
            "spec": {
                "selector": pods,
                "template": {
                    "metadata": {"labels": BILLING},
                    "spec": {"containers": [{"name": "billing", "image": "billing:1"}]},
                },
            }
        },
        "PodDisruptionBudget": {"spec": {"minAvailable": 1, "selector": pods}},
        "NetworkPolicy": {"spec": {"podSelector": {}, "policyTypes": ["Ingress"]}},
        "HorizontalPodAutoscaler": {
            "spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "x"},
                "minReplicas": 1,
                "maxReplicas": 2,
            }
        },
    }
    if kind == "ServiceAccount":
        meta["annotations"] = {"iam.gke.io/gcp-service-account": "billing@p.iam"}
    return {"apiVersion": api_version, "kind": kind, "metadata": meta, **bodies[kind]}


def create(plane: ControlPlane, obj: Obj) -> Obj:
    plane.kubectl("create", "-f", "-", input=json.dumps(obj))
    meta = obj["metadata"]
    return must_get(plane, obj["kind"].lower(), meta["name"], meta["namespace"])


def unchanged(plane: ControlPlane, before: Obj) -> bool:
    meta = before["metadata"]
    after = must_get(plane, before["kind"].lower(), meta["name"], meta["namespace"])
    return bool(after["metadata"]["resourceVersion"] == meta["resourceVersion"])


def warning(plane: ControlPlane, namespace: str, name: str) -> str | None:
    notes = [e["note"] for e in events(plane, namespace, name) if e["type"] == "Warning"]
    return str(notes[0]) if notes else None


def message(runtime: Obj, type_: str) -> str:
    found = next(c for c in runtime["status"]["conditions"] if c["type"] == type_)
    return str(found["message"])


def test_a_name_held_by_someone_elses_object_of_any_kind_is_left_alone_and_reported(
    plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    # The kinds every cluster serves: an optional kind's API (the PodMonitor's) is
    # not installed here, and its object is then never written at all.
    kinds = [kind.kind for kind in MANAGED_KINDS if not kind.optional]
    names = {kind: f"squat-{kind.lower()}" for kind in kinds}
    held = {kind: create(plane, foreign(kind, names[kind], namespace)) for kind in kinds}
    with running_controller(plane, tmp_path / "controller.log", *scoped(namespace)) as controller:
        for kind in kinds:
            apply(plane, runtime_manifest(names[kind], namespace, **EVERY_KIND))
        for kind in kinds:
            name = names[kind]
            runtime = wait_condition(plane, name, namespace, "Degraded", "True", "ResourceConflict")
            assert condition(runtime, "Ready") == ("False", "ResourceConflict")
            assert condition(runtime, "Progressing") == ("False", "ResourceConflict")
            said = message(runtime, "Ready")
            assert f'{kind} "{name}" already exists' in said, said
            assert "no controller" in said, said
            note = wait_for(partial(warning, plane, namespace, name), f"a Warning for {name}")
            assert f'{kind} "{name}"' in note
        controller.wait_quiescent()
        for kind in kinds:
            assert unchanged(plane, held[kind]), f"the tenant's {kind} was written to"
            # Nothing at all is written for a runtime while one of its names is held.
            for other in kinds:
                if other != kind:
                    assert get(plane, other.lower(), names[kind], namespace) is None, (
                        f"{other} {names[kind]} created around a held {kind}"
                    )


def test_a_name_held_by_another_controller_with_the_runtimes_labels_is_left_alone(
    plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    """Labelled as the runtime's, so in the controller's cache, yet controlled by a
    Deployment of someone else's: the cache's copy alone decides it is not ours."""
    owner = create(plane, foreign("Deployment", "billing", namespace))
    service = foreign("Service", "rt", namespace)
    service["metadata"]["labels"] = operator_labels("rt")
    service["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "name": "billing",
            "uid": owner["metadata"]["uid"],
            "controller": True,
        }
    ]
    held = create(plane, service)
    with running_controller(plane, tmp_path / "controller.log", *scoped(namespace)):
        apply(plane, runtime_manifest("rt", namespace))
        runtime = wait_condition(plane, "rt", namespace, "Degraded", "True", "ResourceConflict")
        assert 'controlled by Deployment "billing"' in message(runtime, "Degraded")
        assert unchanged(plane, held)
        assert get(plane, "deployment", "rt", namespace) is None


def test_provisioning_resumes_once_the_name_is_free(
    plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    held = create(plane, foreign("Service", "rt", namespace))
    with running_controller(plane, tmp_path / "controller.log", *scoped(namespace)):
        apply(plane, runtime_manifest("rt", namespace))
        wait_condition(plane, "rt", namespace, "Degraded", "True", "ResourceConflict")
        assert unchanged(plane, held)
        plane.kubectl("delete", "service", "rt", "-n", namespace)
        # Nothing watched announces the deletion: the retry backoff finds the name free.
        runtime = wait_condition(plane, "rt", namespace, "Degraded", "False", "AsExpected")
        uid = runtime["metadata"]["uid"]
        service = must_get(plane, "service", "rt", namespace)
        assert [r["uid"] for r in service["metadata"]["ownerReferences"]] == [uid]
        assert service["spec"]["selector"] == {
            "app.kubernetes.io/name": "trussium",
            "app.kubernetes.io/instance": "rt",
        }


def test_an_orphan_with_the_runtimes_labels_is_adopted(
    plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    """What `kubectl delete --cascade=orphan` of a runtime leaves behind is the next
    runtime of that name's, owner reference and content alike."""
    orphan = foreign("ConfigMap", "rt", namespace)
    orphan["metadata"]["labels"] = operator_labels("rt")
    create(plane, orphan)
    with running_controller(plane, tmp_path / "controller.log", *scoped(namespace)):
        apply(plane, runtime_manifest("rt", namespace))
        wait_for(lambda: get(plane, "deployment", "rt", namespace), "the runtime provisioned")
        runtime = must_get(plane, "trussiumruntime", "rt", namespace)
        adopted = must_get(plane, "configmap", "rt", namespace)
        assert [r["uid"] for r in adopted["metadata"]["ownerReferences"]] == [
            runtime["metadata"]["uid"]
        ]
        assert adopted["data"]["TRUSSIUM_PROVIDER__NAME"] == "ollama"


# Why the ownership check is a read (ADR 0033): the API server offers no write that takes a
# free name and refuses a held one while keeping an apply's pruning. Checked here so that a
# Kubernetes release that changes either answer shows up.


def _apply(plane: ControlPlane, obj: Obj, check: bool = True) -> str:
    done = plane.kubectl(
        "apply",
        "--server-side",
        "--field-manager=owner",
        "-f",
        "-",
        input=json.dumps(obj),
        check=check,
    )
    return done.stdout + done.stderr


def _config_map(namespace: str, data: dict[str, str], **meta: Any) -> Obj:
    metadata = {"name": "cm", "namespace": namespace, **meta}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": data}


def test_an_apply_with_a_uid_precondition_cannot_create(
    plane: ControlPlane, namespace: str
) -> None:
    uid = "00000000-0000-0000-0000-000000000001"
    answer = _apply(plane, _config_map(namespace, {"a": "1"}, uid=uid), check=False)

    assert "uid mismatch" in answer
    assert "no existing object was found" in answer
    assert get(plane, "configmap", "cm", namespace) is None


def test_an_object_first_created_by_a_create_keeps_what_a_later_apply_leaves_out(
    plane: ControlPlane, namespace: str
) -> None:
    created = _config_map(namespace, {"a": "1", "b": "2"})
    plane.kubectl("create", "--field-manager=owner", "-f", "-", input=json.dumps(created))
    _apply(plane, _config_map(namespace, {"a": "1"}))
    assert must_get(plane, "configmap", "cm", namespace)["data"] == {"a": "1", "b": "2"}

    # Created by an apply instead, the same apply prunes the field.
    plane.kubectl("delete", "configmap", "cm", "-n", namespace)
    _apply(plane, created)
    _apply(plane, _config_map(namespace, {"a": "1"}))
    assert must_get(plane, "configmap", "cm", namespace)["data"] == {"a": "1"}
