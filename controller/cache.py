"""An in-memory store of one kind's objects, keyed by namespace/name.

Reconciles read from here instead of the API server. Only what reconcile
needs is kept: managedFields are dropped (often the largest part of an
object), and Secrets keep nothing but their identity.
"""

import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

Obj = dict[str, Any]
# kubectl stores a whole applied object here; for a Secret that includes its data.
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def key_of(obj: Obj) -> str:
    """`namespace/name`, interned: every cache and the work queue share one copy."""
    meta = obj["metadata"]
    namespace = meta.get("namespace", "")
    return sys.intern(f"{namespace}/{meta['name']}" if namespace else str(meta["name"]))


def strip_bookkeeping(obj: Obj) -> Obj:
    """Drop managedFields and the last-applied copy: the controller never reads them."""
    meta = dict(obj.get("metadata", {}))
    meta.pop("managedFields", None)
    annotations = meta.get("annotations")
    if annotations and LAST_APPLIED in annotations:
        meta["annotations"] = {k: v for k, v in annotations.items() if k != LAST_APPLIED}
    return obj | {"metadata": meta}


def identity_only(obj: Obj) -> Obj:
    """A Secret's existence is all the controller may know: name, namespace, uid, version."""
    meta = obj.get("metadata", {})
    kept = ("name", "namespace", "uid", "resourceVersion")
    return {"metadata": {k: meta[k] for k in kept if k in meta}}


@dataclass(frozen=True)
class Change:
    """An observed change: old is None for an add, new is None for a delete."""

    old: Obj | None
    new: Obj | None


class Store:
    def __init__(self, transform: Callable[[Obj], Obj] = strip_bookkeeping) -> None:
        self._objects: dict[str, Obj] = {}
        self._transform = transform

    def get(self, namespace: str, name: str) -> Obj | None:
        return self._objects.get(f"{namespace}/{name}")

    def __len__(self) -> int:
        return len(self._objects)

    def values(self, namespace: str | None = None) -> Iterator[Obj]:
        for obj in self._objects.values():
            if namespace is None or obj["metadata"].get("namespace") == namespace:
                yield obj

    def upsert(self, obj: Obj) -> Change:
        new = self._transform(obj)
        key = key_of(new)
        old = self._objects.get(key)
        self._objects[key] = new
        return Change(old, new)

    def delete(self, obj: Obj) -> Change:
        old = self._objects.pop(key_of(obj), None)
        return Change(old, None)

    def replace(self, items: list[Obj]) -> list[Change]:
        """Swap in a fresh list; the changes it implies (what a missed watch would have said)."""
        fresh = {key_of(new): new for new in map(self._transform, items)}
        changes = [
            Change(self._objects.get(key), new)
            for key, new in fresh.items()
            if _version(self._objects.get(key)) != _version(new)
        ]
        changes += [Change(old, None) for key, old in self._objects.items() if key not in fresh]
        self._objects = fresh
        return changes


def _version(obj: Obj | None) -> str | None:
    return None if obj is None else str(obj["metadata"].get("resourceVersion"))
