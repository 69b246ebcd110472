"""When an apply can be skipped: nothing rendered changed and nobody touched the object."""

import copy
from typing import Any

from trussium_operator.controller.machinery.names import NamespacedName
from trussium_operator.controller.runtime.applied import AppliedObjects

RENDERED: dict[str, Any] = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "rt", "namespace": "ns", "labels": {"app": "trussium"}},
    "spec": {"replicas": 1},
}


def answer(**changes: Any) -> dict[str, Any]:
    live = copy.deepcopy(RENDERED)
    live["metadata"] |= {"resourceVersion": "1", "managedFields": [{"manager": "x"}]}
    live["status"] = {"readyReplicas": 0}
    for path, value in changes.items():
        section, field = path.split("__")
        live[section][field] = value
    return live


def remembered() -> AppliedObjects:
    applied = AppliedObjects()
    applied.record(RENDERED, answer())
    return applied


def test_an_untouched_object_with_the_same_rendering_is_skipped() -> None:
    assert remembered().unchanged(RENDERED, answer(status__readyReplicas=1))
    assert remembered().unchanged(
        RENDERED, answer(metadata__annotations={"deployment.kubernetes.io/revision": "2"})
    ), "annotations the operator does not set are not drift"


def test_any_edit_deletion_or_new_rendering_is_applied() -> None:
    assert not remembered().unchanged(RENDERED, answer(spec__replicas=3))
    assert not remembered().unchanged(RENDERED, answer(metadata__labels={"app": "other"}))
    assert not remembered().unchanged(RENDERED, None), "a deleted object is recreated"
    assert not remembered().unchanged(RENDERED | {"spec": {"replicas": 2}}, answer())
    assert not AppliedObjects().unchanged(RENDERED, answer()), "a fresh process applies once"


def test_forgetting_a_runtime_drops_its_objects() -> None:
    applied = remembered()
    applied.forget(NamespacedName("ns", "rt"))
    assert not applied.unchanged(RENDERED, answer())
