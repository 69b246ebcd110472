"""The offline verdict on manifest documents, shared by `validate`, `render` and CI.

A pure function over parsed documents: each TrussiumRuntime is defaulted
as the API server would store it (`apply_defaults`, shown by `validate
--print-defaulted`) and validated exactly as the admission webhook does it
(`validate_runtime`), and the checks only a set of files allows are added:
a missing `metadata.name`, the same runtime defined twice, and documents
that look like a TrussiumRuntime but would not be one (a misspelled kind
or API group), which would otherwise be skipped in silence.

`stored` judges objects already stored, as the controller will (the
migration preflight): a rule a stored runtime may break is a warning that
says what the operator does about it (`common.ratcheting`).
"""

import difflib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from common.api import TrussiumRuntime
from common.constants import API_VERSION, GROUP, KIND
from common.defaulting import apply_defaults
from common.k8s_validation import FieldError
from common.ratcheting import consequence, tolerated
from common.validation import validate_runtime

Severity = Literal["error", "warning"]
DEFAULT_NAMESPACE = "default"
# difflib's similarity ratio above which a kind or group counts as a misspelling of ours.
NEAR_MISS_RATIO = 0.8


@dataclass(frozen=True)
class Finding:
    """One problem of one object; `field` is a Kubernetes field path, never empty."""

    file: str
    namespace: str
    name: str
    severity: Severity
    field: str
    message: str

    def __str__(self) -> str:
        severity = "warning: " if self.severity == "warning" else ""
        return f"{self.file}: {self.namespace}/{self.name}: {severity}{self.field}: {self.message}"


@dataclass(frozen=True)
class CheckedRuntime:
    """A TrussiumRuntime document after defaulting; `model` only when it is valid and named.

    `defaulted` is None for an apiVersion this version does not serve.
    """

    file: str
    namespace: str
    name: str
    defaulted: dict[str, Any] | None
    model: TrussiumRuntime | None


@dataclass
class OfflineReport:
    runtimes: list[CheckedRuntime] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)

    def failing(self, *, strict: bool) -> list[Finding]:
        """The findings that fail a run: errors, and warnings too when `strict`."""
        return [f for f in self.findings if f.severity == "error" or strict]

    def invalid_runtimes(self) -> int:
        """Runtimes with at least one error."""
        return len(
            {(f.file, f.namespace, f.name) for f in self.findings if f.severity == "error"}
            & {(r.file, r.namespace, r.name) for r in self.runtimes}
        )


FROZEN = "once stored, the operator does not reconcile this runtime until it is fixed (InvalidSpec)"


def _stored(where: tuple[str, str, str], error: FieldError) -> Finding:
    """A stored runtime's violation: a warning with its consequence when tolerated."""
    if tolerated(error):
        message = (
            f"{error.message} [{error.rule}]; still reconciled, with the ConfigurationWarnings "
            f"condition: {consequence(error)}"
        )
        return Finding(*where, "warning", error.path, message)
    return Finding(*where, "error", error.path, f"{error.message}; {FROZEN}")


def check_documents(
    documents: Iterable[tuple[str, object]], *, generate_name: bool = True, stored: bool = False
) -> OfflineReport:
    """Check every `(file, document)`; documents of other kinds are skipped.

    `generate_name`: accept `metadata.generateName` instead of a name, as
    `kubectl create` does (rendering needs the name itself). `stored`: judge
    the objects as stored runtimes (module docstring).
    """
    report = OfflineReport()
    first_seen: dict[tuple[str, str], str] = {}
    for file, document in documents:
        if not isinstance(document, dict):
            continue
        metadata = document.get("metadata")
        metadata = metadata if isinstance(metadata, dict) else {}
        namespace = str(metadata.get("namespace") or DEFAULT_NAMESPACE)
        name = metadata.get("name")
        where = (file, namespace, str(name or metadata.get("generateName") or "<unnamed>"))
        near_miss = _near_miss(document)
        if near_miss is not None:
            report.findings.append(Finding(*where, "warning", *near_miss))
            continue
        if document.get("kind") != KIND:
            continue
        if document.get("apiVersion") != API_VERSION:
            report.findings.append(
                Finding(*where, "error", "apiVersion", f"not served; use {API_VERSION}")
            )
            report.runtimes.append(CheckedRuntime(*where, None, None))
            continue
        defaulted = apply_defaults(document).object
        result = validate_runtime(defaulted)  # defaults the spec again: a no-op walk
        findings = [
            _stored(where, e) if stored else Finding(*where, "error", e.path, e.message)
            for e in result.errors
        ]
        findings += [Finding(*where, "warning", w.path, w.message) for w in result.field_warnings]
        named = isinstance(name, str) and name != ""
        if not named:
            if name or not (generate_name and metadata.get("generateName")):
                problem = "must be a string" if name else "Required value"
                findings.append(Finding(*where, "error", "metadata.name", problem))
        elif (key := (namespace, str(name))) in first_seen:
            message = (
                f"{namespace}/{name} is also defined in {first_seen[key]}; "
                "applying both keeps only the later one"
            )
            findings.append(Finding(*where, "warning", "metadata.name", message))
        else:
            first_seen[key] = file
        model: TrussiumRuntime | None = None
        if named and result.parsed and not any(f.severity == "error" for f in findings):
            model, problem = result.runtime, result.parsed.runtime_problem
            findings += [Finding(*where, "error", "metadata", problem)] if problem else []
        report.findings += findings
        report.runtimes.append(CheckedRuntime(*where, defaulted, model))
    return report


def _similar(value: str, target: str) -> bool:
    ratio = difflib.SequenceMatcher(None, value.lower(), target.lower()).ratio()
    return value != target and ratio >= NEAR_MISS_RATIO


def _near_miss(document: dict[str, Any]) -> tuple[str, str] | None:
    """(field, message) when the document is almost, but not, a TrussiumRuntime."""
    kind = document.get("kind")
    kind = kind if isinstance(kind, str) else ""
    api_version = document.get("apiVersion")
    api_version = api_version if isinstance(api_version, str) else ""
    group = api_version.rpartition("/")[0]
    if _similar(kind, KIND):
        return "kind", f"unknown kind {kind!r}; did you mean {KIND!r}? Not validated"
    if kind == KIND and group != GROUP:
        return (
            "apiVersion",
            f"{KIND} is served as {API_VERSION}, not {api_version!r}; not validated",
        )
    if kind != KIND and (group == GROUP or _similar(group, GROUP)):
        return "kind", f"{GROUP} serves only {KIND}, not {kind!r}; not validated"
    return None
