"""Parsing a cached runtime once per reconcile, validating each version once.

`validate_runtime` checks the whole object against the CRD schema and the
contract's rules, a third of a settled reconcile's CPU (ADR 0016). Most
reconciles, those a Deployment's status change causes, read the same
runtime version as the reconcile before, and a verdict depends on nothing
but the object, which a resourceVersion names. So each runtime's last
valid resourceVersion is kept: a reconcile of it only parses
(`parse_runtime`), any other validates, and the verdict carries the parse
(`ValidationResult.runtime`). Either way the runtime is parsed once. An
invalid version is validated each time: its status needs the errors.

A stored runtime that breaks only rules it may break (`common.ratcheting`)
counts as valid, with those violations as its warnings, kept beside its version.
"""

from common.api import TrussiumRuntime
from common.parsing import parse_runtime
from common.ratcheting import split_stored
from common.validation import FieldError, validate_runtime
from controller.cache import Obj
from controller.names import NamespacedName

Errors = tuple[FieldError, ...]


class ValidVersions:
    def __init__(self) -> None:
        self._valid: dict[NamespacedName, tuple[str, Errors]] = {}

    def parse(self, key: NamespacedName, obj: Obj) -> tuple[TrussiumRuntime | None, Errors, Errors]:
        """The runtime as admission would see it, defaulted and parsed, with the
        violations it is reconciled with; or why it is frozen."""
        version = obj["metadata"].get("resourceVersion")
        known = self._valid.get(key)
        if version and known and known[0] == version:
            runtime = parse_runtime(obj).runtime
            if runtime is not None:
                return runtime, (), known[1]
        verdict = validate_runtime(obj)
        runtime = verdict.runtime
        freezing, warnings = split_stored(verdict.errors)
        if freezing or runtime is None:
            self._valid.pop(key, None)
            problem = verdict.parsed.runtime_problem if verdict.parsed else ""
            return None, verdict.errors or (FieldError("metadata", problem),), ()
        if version:
            self._valid[key] = (version, warnings)
        return runtime, (), warnings

    def forget(self, key: NamespacedName) -> None:
        self._valid.pop(key, None)
