"""Which TrussiumRuntime keys a change must enqueue (the watch predicates and mappers).

Pure functions of the changed objects, and the runtimes' Secret references
kept as an index of the runtimes cache, so the watch table in `watches.py`
reads like controller-runtime's `For(...).Owns(...).Watches(...)` sentence.
"""

from typing import Any, Protocol

import pydantic

from trussium_operator.common import constants as c
from trussium_operator.common.api import STORED_RUNTIME, TrussiumRuntimeSpec
from trussium_operator.common.references import referenced_secret_names
from trussium_operator.controller.machinery.cache import Change, Obj
from trussium_operator.controller.machinery.names import NamespacedName


def runtime_change(change: Change) -> list[NamespacedName]:
    """Adds and deletes enqueue; an update only when metadata.generation moved.

    Status writes (ours included) and metadata-only edits leave generation
    alone, so they never cause a reconcile loop.
    """
    if change.old is None or change.new is None:
        return [NamespacedName.of(change.new or change.old or {})]
    if _generation(change.old) != _generation(change.new):
        return [NamespacedName.of(change.new)]
    return []


def _generation(obj: Obj) -> Any:
    return obj["metadata"].get("generation")


def owner_of(change: Change) -> list[NamespacedName]:
    """An owned object maps to the TrussiumRuntime in its controller ownerReference."""
    obj = change.new or change.old or {}
    meta = obj.get("metadata", {})
    for reference in meta.get("ownerReferences") or ():
        if (
            reference.get("controller")
            and reference.get("kind") == c.KIND
            and str(reference.get("apiVersion", "")).startswith(f"{c.GROUP}/")
        ):
            return [NamespacedName(meta.get("namespace", ""), reference["name"])]
    return []


class ReferenceListener(Protocol):
    """Told when a Secret gains its first referencing runtime or loses its last."""

    def referenced(self, secret: NamespacedName) -> None: ...

    def unreferenced(self, secret: NamespacedName) -> None: ...


class SecretReferences:
    """(namespace, Secret name) -> the runtimes referencing it: an index of the runtimes
    Store, so a Secret event costs a lookup instead of parsing every runtime's spec,
    and the Secret cache knows which Secrets to keep (its listener).

    A runtime's references are parsed once per spec change; a status write or a
    metadata edit leaves the spec, and the index, alone. A spec change adds the new
    references before it releases the old ones, so a Secret named in both never
    looks unreferenced in between."""

    def __init__(self) -> None:
        self._runtimes: dict[NamespacedName, set[NamespacedName]] = {}
        self._secrets: dict[NamespacedName, tuple[str, ...]] = {}
        self._listener: ReferenceListener | None = None

    def listen(self, listener: ReferenceListener) -> None:
        self._listener = listener

    def __contains__(self, secret: NamespacedName) -> bool:
        return secret in self._runtimes

    def update(self, change: Change) -> None:
        if change.old and change.new and change.old.get("spec") == change.new.get("spec"):
            return
        runtime = NamespacedName.of(change.new or change.old or {})
        old = self._secrets.pop(runtime, ())
        new = tuple(_secret_names(change.new)) if change.new is not None else ()
        if new:
            self._secrets[runtime] = new
        for name in new:
            self._reference(runtime, NamespacedName(runtime.namespace, name))
        for name in set(old) - set(new):
            self._release(runtime, NamespacedName(runtime.namespace, name))

    def _reference(self, runtime: NamespacedName, secret: NamespacedName) -> None:
        referencing = self._runtimes.setdefault(secret, set())
        if not referencing and self._listener is not None:
            self._listener.referenced(secret)
        referencing.add(runtime)

    def _release(self, runtime: NamespacedName, secret: NamespacedName) -> None:
        referencing = self._runtimes.get(secret, set())
        referencing.discard(runtime)
        if not referencing:
            self._runtimes.pop(secret, None)
            if self._listener is not None:
                self._listener.unreferenced(secret)

    def runtimes_referencing(self, change: Change) -> list[NamespacedName]:
        """The mapper of Secret changes: every runtime in the Secret's namespace that
        references it by name."""
        secret = NamespacedName.of(change.new or change.old or {})
        return sorted(self._runtimes.get(secret, ()))


def _secret_names(runtime: Obj) -> list[str]:
    try:
        spec = TrussiumRuntimeSpec.model_validate(runtime.get("spec") or {}, context=STORED_RUNTIME)
    except pydantic.ValidationError:
        return []
    return referenced_secret_names(spec)
