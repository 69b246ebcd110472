"""The watch events of the controller's own writes cost no second transform and no
reconcile that would change nothing."""

from typing import Any

from tests.support.fakekube import FakeKube
from trussium_operator.controller.machinery.cache import Change
from trussium_operator.controller.machinery.informer import Informer
from trussium_operator.controller.machinery.kube import Resource

DEPLOYMENTS = Resource("apps/v1", "Deployment", "deployments")


def deployment(version: str, replicas: int = 1) -> dict[str, Any]:
    meta = {"name": "demo", "namespace": "prod", "resourceVersion": version}
    return {"kind": "Deployment", "metadata": meta, "status": {"replicas": replicas}}


def test_a_watch_event_of_the_version_the_store_holds_changes_nothing() -> None:
    """A runtime's status write stores the answer; its own watch event then reports no
    change (no second transform, no mapper call), and the next version does."""
    changes: list[Change] = []
    informer = Informer(FakeKube(), DEPLOYMENTS, changes.append)
    informer.cache.store.upsert(deployment("10"))
    assert informer._handle({"type": "MODIFIED", "object": deployment("10")}, "9") == "10"
    assert changes == []
    informer._handle({"type": "MODIFIED", "object": deployment("11", replicas=2)}, "10")
    assert [c.new["status"] for c in changes if c.new] == [{"replicas": 2}]
