"""The takeover's cache summary and its one guarded patch (controller/migration/takeover.py)."""

from typing import Any

from trussium_operator.controller.machinery.cache import Cache, Store
from trussium_operator.controller.migration.takeover import (
    managers_kept,
    needs_takeover,
    takeover_patch,
)

LEGACY = frozenset({"manager"})


def obj(*entries: dict[str, Any]) -> dict[str, Any]:
    return {
        "kind": "ConfigMap",
        "metadata": {"name": "rt", "resourceVersion": "42", "managedFields": list(entries)},
        "data": {"A": "1"},
    }


GO = {"manager": "manager", "operation": "Update", "fieldsV1": {"f:data": {"f:A": {}}}}
OURS = {"manager": "trussium-operator", "operation": "Apply", "fieldsV1": {"f:data": {}}}


def test_the_cache_keeps_who_manages_but_not_the_field_sets() -> None:
    kept = managers_kept(obj(GO, OURS))
    assert kept["metadata"]["managedFields"] == [
        {"manager": "manager", "operation": "Update"},
        {"manager": "trussium-operator", "operation": "Apply"},
    ]
    assert kept["data"] == {"A": "1"}
    assert needs_takeover(kept, LEGACY)
    assert not needs_takeover(managers_kept(obj(OURS)), LEGACY)
    assert not needs_takeover(None, LEGACY)


def test_one_patch_guarded_by_the_resource_version() -> None:
    patch = takeover_patch(obj(GO), LEGACY, "trussium-operator")
    assert patch[0] == {"op": "test", "path": "/metadata/resourceVersion", "value": "42"}
    assert patch[1]["op"] == "replace"
    assert patch[1]["path"] == "/metadata/managedFields"
    assert [e["manager"] for e in patch[1]["value"]] == ["trussium-operator"]
    assert len(patch) == 2
    assert takeover_patch(obj(OURS), LEGACY, "trussium-operator") == []


def test_owned_caches_keep_the_summary_store_even_while_empty() -> None:
    store = Store(managers_kept)
    assert Cache(store).store is store, "an empty Store is falsy: it must not be replaced"
