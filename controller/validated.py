"""Runtime versions that passed validation, so each version is validated once.

`validate_runtime` checks the whole object against the CRD schema and the
contract's rules, a third of a settled reconcile's CPU (ADR 0016). Most
reconciles, those a Deployment's status change causes, read the same
runtime version as the reconcile before, and a verdict depends on nothing
but the object, which a resourceVersion names. So each runtime's last
valid resourceVersion is kept, and a reconcile of it skips validation. An
invalid version is validated each time: its status needs the errors.
"""

from common.validation import FieldError, validate_runtime
from controller.cache import Obj


class ValidVersions:
    def __init__(self) -> None:
        self._valid: dict[str, str] = {}

    def errors(self, key: str, obj: Obj) -> tuple[FieldError, ...]:
        """`validate_runtime(obj).errors`, from memory when this version was valid before."""
        version = obj["metadata"].get("resourceVersion")
        if version and self._valid.get(key) == version:
            return ()
        errors = validate_runtime(obj).errors
        if errors or not version:
            self._valid.pop(key, None)
        else:
            self._valid[key] = version
        return errors

    def forget(self, key: str) -> None:
        self._valid.pop(key, None)
