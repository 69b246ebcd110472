"""Which TrussiumRuntime keys a change must enqueue (the watch predicates and mappers).

Pure functions of the changed objects, and the runtimes' Secret references
kept as an index of the runtimes cache, so the watch table in `watches.py`
reads like controller-runtime's `For(...).Owns(...).Watches(...)` sentence.
"""

from typing import Any

import pydantic

from common import constants as c
from common.api import TrussiumRuntimeSpec
from common.references import referenced_secret_names
from controller.cache import Change, Obj
from controller.names import NamespacedName


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


class SecretReferences:
    """(namespace, Secret name) -> the runtimes referencing it: an index of the runtimes
    Store, so a Secret event costs a lookup instead of parsing every runtime's spec.

    A runtime's references are parsed once per spec change; a status write or a
    metadata edit leaves the spec, and the index, alone."""

    def __init__(self) -> None:
        self._runtimes: dict[NamespacedName, set[NamespacedName]] = {}
        self._secrets: dict[NamespacedName, tuple[str, ...]] = {}

    def update(self, change: Change) -> None:
        if change.old and change.new and change.old.get("spec") == change.new.get("spec"):
            return
        if change.old is not None:
            self._drop(NamespacedName.of(change.old))
        if change.new is not None:
            self._add(NamespacedName.of(change.new), change.new)

    def _add(self, runtime: NamespacedName, obj: Obj) -> None:
        names = tuple(_secret_names(obj))
        if names:
            self._secrets[runtime] = names
        for name in names:
            self._runtimes.setdefault(NamespacedName(runtime.namespace, name), set()).add(runtime)

    def _drop(self, runtime: NamespacedName) -> None:
        for name in self._secrets.pop(runtime, ()):
            secret = NamespacedName(runtime.namespace, name)
            referencing = self._runtimes.get(secret, set())
            referencing.discard(runtime)
            if not referencing:
                self._runtimes.pop(secret, None)

    def runtimes_referencing(self, change: Change) -> list[NamespacedName]:
        """The mapper of Secret changes: every runtime in the Secret's namespace that
        references it by name."""
        secret = NamespacedName.of(change.new or change.old or {})
        return sorted(self._runtimes.get(secret, ()))


def _secret_names(runtime: Obj) -> list[str]:
    try:
        spec = TrussiumRuntimeSpec.model_validate(runtime.get("spec") or {})
    except pydantic.ValidationError:
        return []
    return referenced_secret_names(spec)
