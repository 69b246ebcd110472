"""One watch's cache: an in-memory store of one kind's objects, keyed by
`NamespacedName`, and whether it can be trusted yet.

Reconciles read from here instead of the API server. Only what reconcile
needs is kept: managedFields are dropped (often the largest part of an
object), and Secrets keep nothing but their identity. A store can keep an
index up to date with it (the runtimes' Secret references), so a lookup
never has to walk and parse every cached object.
"""

import asyncio
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from trussium_operator.controller.machinery.names import NamespacedName

Obj = dict[str, Any]
# kubectl stores a whole applied object here; for a Secret that includes its data.
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


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


class Index(Protocol):
    """Something derived from a store's objects, told about each change as it is stored."""

    def update(self, change: Change) -> None: ...


class Store:
    def __init__(
        self, transform: Callable[[Obj], Obj] = strip_bookkeeping, index: Index | None = None
    ) -> None:
        self._objects: dict[NamespacedName, Obj] = {}
        self._transform = transform
        self._index = index

    def get(self, key: NamespacedName) -> Obj | None:
        return self._objects.get(key)

    def __len__(self) -> int:
        return len(self._objects)

    def values(self, namespace: str | None = None) -> Iterator[Obj]:
        for obj in self._objects.values():
            if namespace is None or obj["metadata"].get("namespace") == namespace:
                yield obj

    def admits(self, obj: Obj) -> bool:
        """Whether to keep `obj`; asked of each listed item as its page arrives, so a
        scoped store (`controller.runtime.referenced_secrets`) never holds what it drops."""
        return True

    def listing(self) -> None:
        """A list begins (a scoped store notes what it will settle)."""

    def upsert(self, obj: Obj) -> Change | None:
        """The change, or None when the store does not keep `obj`."""
        new = self._transform(obj)
        key = NamespacedName.of(new)
        old = self._objects.get(key)
        self._objects[key] = new
        return self._indexed(Change(old, new))

    def delete(self, obj: Obj) -> Change | None:
        old = self._objects.pop(NamespacedName.of(obj), None)
        return self._indexed(Change(old, None))

    def replace(self, items: list[Obj]) -> list[Change]:
        """Swap in a fresh list; the changes it implies (what a missed watch would have said)."""
        fresh = {NamespacedName.of(new): new for new in map(self._transform, items)}
        changes = [
            Change(self._objects.get(key), new)
            for key, new in fresh.items()
            if _version(self._objects.get(key)) != _version(new)
        ]
        changes += [Change(old, None) for key, old in self._objects.items() if key not in fresh]
        self._objects = fresh
        return [self._indexed(change) for change in changes]

    def _indexed(self, change: Change) -> Change:
        if self._index is not None:
            self._index.update(change)
        return change


class Cache:
    """What readers of one watch get: its Store, and whether the Store can be trusted.

    The informer filling it sets `synced` after its first complete list (and
    keeps it), `fresh` while listed and watching with no failure since,
    `last_error` while its last list failed, and `served` False while the API
    of an optional resource is not served (the store is then empty)."""

    def __init__(self, store: Store | None = None) -> None:
        self.store = store if store is not None else Store()  # an empty Store is falsy
        self.synced = asyncio.Event()
        self.fresh = False
        self.last_error: str | None = None
        self.served = True


def _version(obj: Obj | None) -> str | None:
    return None if obj is None else str(obj["metadata"].get("resourceVersion"))
