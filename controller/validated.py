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
"""

from common.api import TrussiumRuntime
from common.parsing import parse_runtime
from common.validation import FieldError, validate_runtime
from controller.machinery.cache import Obj
from controller.machinery.names import NamespacedName


class ValidVersions:
    def __init__(self) -> None:
        self._valid: dict[NamespacedName, str] = {}

    def parse(
        self, key: NamespacedName, obj: Obj
    ) -> tuple[TrussiumRuntime | None, tuple[FieldError, ...]]:
        """The runtime as admission would see it, defaulted and parsed; or why it is invalid."""
        version = obj["metadata"].get("resourceVersion")
        if version and self._valid.get(key) == version:
            runtime = parse_runtime(obj).runtime
            if runtime is not None:
                return runtime, ()
        verdict = validate_runtime(obj)
        runtime = verdict.runtime
        if verdict.errors or runtime is None:
            self._valid.pop(key, None)
            problem = verdict.parsed.runtime_problem if verdict.parsed else ""
            return None, verdict.errors or (FieldError("metadata", problem),)
        if version:
            self._valid[key] = version
        return runtime, ()

    def forget(self, key: NamespacedName) -> None:
        self._valid.pop(key, None)
