"""Parsing a cached runtime once per reconcile, validating each generation once.

`validate_runtime` checks the whole object against the CRD schema and the
contract's rules, a third of a settled reconcile's CPU (ADR 0016). Most
reconciles, those a Deployment's status change causes, read the same spec
as the reconcile before, and a verdict depends only on the spec and the
name: the spec is what `metadata.generation` counts, and the name never
changes. So each runtime's last valid generation is kept (with its uid, so a
runtime deleted and created again under the same name is validated afresh):
a reconcile of it only parses (`parse_runtime`), any other validates, and the
verdict carries the parse (`ValidationResult.runtime`). Either way the runtime
is parsed once. The status writes of a rollout leave the generation alone, so
they cost no validation. An invalid generation is validated each time: its
status needs the errors.

A stored runtime that breaks only rules it may break (`common.ratcheting`)
counts as valid, with those violations as its warnings, kept beside its generation,
and so do the provider settings it cannot serve with (`common.provider_warnings`).
"""

from trussium_operator.common.api import TrussiumRuntime
from trussium_operator.common.parsing import parse_runtime
from trussium_operator.common.provider_warnings import provider_warnings
from trussium_operator.common.ratcheting import split_stored
from trussium_operator.common.validation import FieldError, validate_runtime
from trussium_operator.controller.machinery.cache import Obj
from trussium_operator.controller.machinery.names import NamespacedName

Errors = tuple[FieldError, ...]


class ValidGenerations:
    def __init__(self) -> None:
        self._valid: dict[NamespacedName, tuple[tuple[str, int], Errors]] = {}

    def parse(self, key: NamespacedName, obj: Obj) -> tuple[TrussiumRuntime | None, Errors, Errors]:
        """The runtime as admission would see it, defaulted and parsed, with the
        violations it is reconciled with; or why it is frozen."""
        meta = obj["metadata"]
        uid, generation = meta.get("uid"), meta.get("generation")
        seen = (uid, generation) if isinstance(uid, str) and isinstance(generation, int) else None
        known = self._valid.get(key)
        if seen is not None and known is not None and known[0] == seen:
            runtime = parse_runtime(obj, stored=True).runtime
            if runtime is not None:
                return runtime, (), known[1]
        verdict = validate_runtime(obj, stored=True)
        runtime = verdict.runtime
        freezing, tolerated = split_stored(verdict.errors)
        if freezing or runtime is None:
            self._valid.pop(key, None)
            problem = verdict.parsed.runtime_problem if verdict.parsed else ""
            return None, verdict.errors or (FieldError("metadata", problem),), ()
        warnings = tolerated + provider_warnings(runtime.spec)
        if seen is not None:
            self._valid[key] = (seen, warnings)
        return runtime, (), warnings

    def forget(self, key: NamespacedName) -> None:
        self._valid.pop(key, None)
