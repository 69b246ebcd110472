"""Taking over a managed object's legacy field ownership: one guarded write per object.

The caches drop managedFields (they are large), but keep who manages an
object (`managers_kept`), so the reconciler can tell from memory that a
legacy manager wrote it: on first contact with objects the Go operator
created, and whenever a legacy writer updates one again. Only then is the
full object read, the new managedFields computed by
`common.managed_fields.take_over`, and written with a JSON patch whose
first operation tests the resourceVersion: a concurrent write makes it
fail, `controller.runtime.errors.classify` takes that for a race, and the
reconcile retries on fresh data. Nothing is deleted or recreated, and no
field value changes; the following apply prunes.
"""

import logging
from collections.abc import Iterable
from typing import Any

from trussium_operator.common.managed_fields import has_legacy_entries, take_over
from trussium_operator.controller.machinery.cache import Obj, strip_bookkeeping
from trussium_operator.controller.machinery.kube import JSON_PATCH, ApiError, Kube, Resource
from trussium_operator.controller.machinery.names import NamespacedName

log = logging.getLogger("controller.migration.takeover")
# What of a managedFields entry the cache keeps: enough to spot a legacy writer.
_SUMMARY = ("manager", "operation", "subresource")


def managers_kept(obj: Obj) -> Obj:
    """The cache transform for managed objects: bookkeeping dropped, managers summarised."""
    entries = (obj.get("metadata") or {}).get("managedFields") or ()
    stripped = strip_bookkeeping(obj)
    stripped["metadata"]["managedFields"] = [
        {key: entry[key] for key in _SUMMARY if key in entry} for entry in entries
    ]
    return stripped


def needs_takeover(live: Obj | None, legacy: Iterable[str]) -> bool:
    return live is not None and has_legacy_entries(live["metadata"].get("managedFields"), legacy)


def takeover_patch(obj: Obj, legacy: Iterable[str], manager: str) -> list[dict[str, Any]]:
    """The guarded JSON patch moving `obj`'s legacy entries to `manager`; empty if none."""
    meta = obj["metadata"]
    entries = take_over(meta.get("managedFields"), legacy, manager)
    if entries is None:
        return []
    return [
        {"op": "test", "path": "/metadata/resourceVersion", "value": meta["resourceVersion"]},
        {"op": "replace", "path": "/metadata/managedFields", "value": entries},
    ]


async def take_over_fields(
    kube: Kube, resource: Resource, key: NamespacedName, legacy: Iterable[str], manager: str
) -> None:
    """Move the legacy managers' fields of one object to `manager` (nothing to do when
    none are left or the object is gone)."""
    path = resource.path(*key)
    try:
        obj = await kube.request("GET", path)
    except ApiError as error:
        if error.not_found:
            return
        raise
    patch = takeover_patch(obj, legacy, manager)
    if not patch:
        return
    moved = sorted(
        {str(e.get("manager")) for e in obj["metadata"].get("managedFields") or ()} & set(legacy)
    )
    log.info(
        "taking over fields of legacy managers",
        extra={"fields": {"kind": resource.kind, **key.fields(), "managers": moved}},
    )
    try:
        await kube.request("PATCH", path, body=patch, content_type=JSON_PATCH)
    except ApiError as error:
        if not error.not_found:  # deleted meanwhile: nothing left to take over
            raise
