"""Parsing a cached runtime, validating each version once.

`validate_runtime` checks the whole object against the CRD schema and the
contract's rules, a third of a settled reconcile's CPU (ADR 0016). Most
reconciles, those a Deployment's status change causes, read the same
runtime version as the reconcile before, and a verdict depends on nothing
but the object, which a resourceVersion names. So each runtime's last
valid resourceVersion is kept, and a reconcile of it skips validation. An
invalid version is validated each time: its status needs the errors.
"""

from common.api import TrussiumRuntime
from common.defaulting import apply_defaults
from common.validation import FieldError, validate_runtime
from controller.cache import Obj
from controller.names import NamespacedName


class ValidVersions:
    def __init__(self) -> None:
        self._valid: dict[NamespacedName, str] = {}

    def parse(
        self, key: NamespacedName, obj: Obj
    ) -> tuple[TrussiumRuntime | None, tuple[FieldError, ...]]:
        """The runtime as admission would see it, defaulted and parsed; or why it is invalid."""
        version = obj["metadata"].get("resourceVersion")
        if not version or self._valid.get(key) != version:
            errors = validate_runtime(obj).errors
            if errors:
                self._valid.pop(key, None)
                return None, errors
            if version:
                self._valid[key] = version
        return TrussiumRuntime.model_validate(apply_defaults(obj).object), ()

    def forget(self, key: NamespacedName) -> None:
        self._valid.pop(key, None)
