"""The informer cache: what it keeps, and what a relist reports."""

from typing import Any

from trussium_operator.controller.machinery.cache import LAST_APPLIED, Store, identity_only
from trussium_operator.controller.machinery.names import NamespacedName


def obj(name: str, version: str, **meta: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns", "resourceVersion": version, **meta},
        "spec": {"x": 1},
    }


def test_cached_objects_lose_managed_fields_and_the_last_applied_copy() -> None:
    store = Store()
    store.upsert(
        obj("a", "1", managedFields=[{"manager": "m"}], annotations={LAST_APPLIED: "{}", "k": "v"})
    )
    cached = store.get(NamespacedName("ns", "a")) or {}
    assert "managedFields" not in cached["metadata"]
    assert cached["metadata"]["annotations"] == {"k": "v"}
    assert cached["spec"] == {"x": 1}


def test_secret_identity_keeps_nothing_but_identity() -> None:
    store = Store(identity_only)
    store.upsert(obj("s", "1", uid="u", labels={"a": "b"}, annotations={LAST_APPLIED: "data"}))
    assert store.get(NamespacedName("ns", "s")) == {
        "metadata": {"name": "s", "namespace": "ns", "uid": "u", "resourceVersion": "1"}
    }


def test_relist_reports_what_changed_appeared_or_vanished_meanwhile() -> None:
    store = Store()
    for item in (obj("same", "1"), obj("changed", "1"), obj("gone", "1")):
        store.upsert(item)
    changes = store.replace([obj("same", "1"), obj("changed", "2"), obj("new", "3")])

    def name(o: dict[str, Any] | None) -> str:
        return "-" if o is None else str(o["metadata"]["name"])

    described = sorted((name(c.old), name(c.new)) for c in changes)
    assert described == [("-", "new"), ("changed", "changed"), ("gone", "-")]
    assert store.get(NamespacedName("ns", "gone")) is None
    assert sorted(o["metadata"]["name"] for o in store.values("ns")) == ["changed", "new", "same"]
