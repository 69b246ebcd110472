"""Which TrussiumRuntime keys a change must enqueue (the watch predicates and mappers).

Pure functions of the changed objects, so the wiring in `manager.py` reads
like controller-runtime's `For(...).Owns(...).Watches(...)` sentence.
"""

from collections.abc import Iterable
from typing import Any

import pydantic

from common import constants as c
from common.api import TrussiumRuntimeSpec
from common.references import referenced_secret_names
from controller.cache import Change, Obj, key_of


def runtime_change(change: Change) -> list[str]:
    """Adds and deletes enqueue; an update only when metadata.generation moved.

    Status writes (ours included) and metadata-only edits leave generation
    alone, so they never cause a reconcile loop.
    """
    if change.old is None or change.new is None:
        return [key_of(change.new or change.old or {})]
    if _generation(change.old) != _generation(change.new):
        return [key_of(change.new)]
    return []


def _generation(obj: Obj) -> Any:
    return obj["metadata"].get("generation")


def owner_of(change: Change) -> list[str]:
    """An owned object maps to the TrussiumRuntime in its controller ownerReference."""
    obj = change.new or change.old or {}
    meta = obj.get("metadata", {})
    for reference in meta.get("ownerReferences") or ():
        if (
            reference.get("controller")
            and reference.get("kind") == c.KIND
            and str(reference.get("apiVersion", "")).startswith(f"{c.GROUP}/")
        ):
            return [f"{meta.get('namespace', '')}/{reference['name']}"]
    return []


def runtimes_referencing_secret(change: Change, runtimes: Iterable[Obj]) -> list[str]:
    """A Secret maps to every runtime in its namespace that references it by name."""
    secret = (change.new or change.old or {}).get("metadata", {})
    name = secret.get("name")
    return [
        key_of(runtime)
        for runtime in runtimes
        if runtime["metadata"].get("namespace") == secret.get("namespace")
        and name in _secret_names(runtime)
    ]


def _secret_names(runtime: Obj) -> list[str]:
    try:
        spec = TrussiumRuntimeSpec.model_validate(runtime.get("spec") or {})
    except pydantic.ValidationError:
        return []
    return referenced_secret_names(spec)
