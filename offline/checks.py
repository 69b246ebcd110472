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
from itertools import repeat
from typing import Any, Literal

from trussium_operator.common.api import TrussiumRuntime
from trussium_operator.common.constants import API_VERSION, GROUP, KIND
from trussium_operator.common.defaulting import apply_defaults
from trussium_operator.common.k8s_validation import FieldError
from trussium_operator.common.ratcheting import consequence, tolerated
from trussium_operator.common.rules import Rule
from trussium_operator.common.validation import validate_runtime
from trussium_operator.offline.manifests import Manifest, field_path

Severity = Literal["error", "warning"]
DEFAULT_NAMESPACE = "default"
DUPLICATE_KEY = (
    "set more than once in one mapping (a `<<` merge included): kubectl applies the last "
    "value; kube-apiserver refuses the file when it reads the YAML with strict field validation"
)
FROZEN = "once stored, the operator does not reconcile this runtime until it is fixed (InvalidSpec)"
# difflib's similarity ratio above which a kind or group counts as a misspelling of ours.
NEAR_MISS_RATIO = 0.8


@dataclass(frozen=True)
class Finding:
    """One problem of one object; `field` is a Kubernetes field path, never empty.

    `line` and `column` (1-based) point at the field in the file, or at its
    nearest parent there, when the document came with positions; `rule` names
    the rule broken (`common.rules`).
    """

    file: str
    namespace: str
    name: str
    severity: Severity
    field: str
    message: str
    line: int | None = None
    column: int | None = None
    rule: str = ""

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
class DocumentCheck:
    """The verdict on one document alone; `named` is its (namespace, name) when it has one,
    `name_at` where that name is in the file."""

    findings: list[Finding] = field(default_factory=list)
    runtime: CheckedRuntime | None = None
    named: tuple[str, str] | None = None
    name_at: tuple[int | None, int | None] = (None, None)


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


def check_documents(
    documents: Iterable[tuple[str, object]],
    *,
    generate_name: bool = True,
    manifests: Iterable[Manifest | None] | None = None,
    stored: bool = False,
) -> OfflineReport:
    """Check every `(file, document)`; documents of other kinds are skipped.

    `generate_name`: accept `metadata.generateName` instead of a name, as
    `kubectl create` does (rendering needs the name itself). `manifests`,
    in the same order, gives the findings their positions. `stored`: judge
    the objects as stored runtimes (module docstring).
    """
    located = manifests if manifests is not None else repeat(None)
    return combine(
        check_document(file, document, manifest, generate_name=generate_name, stored=stored)
        for (file, document), manifest in zip(documents, located, strict=False)
    )


def _judged(error: FieldError, stored: bool) -> tuple[Severity, str]:
    """An error's severity and message; for a stored runtime, a tolerated one is a
    warning with what the operator does about it."""
    if not stored:
        return "error", error.message
    if tolerated(error):
        return "warning", (
            f"{error.message} [{error.rule}]; still reconciled, with the ConfigurationWarnings "
            f"condition: {consequence(error)}"
        )
    return "error", f"{error.message}; {FROZEN}"


def check_document(
    file: str,
    document: object,
    manifest: Manifest | None = None,
    *,
    generate_name: bool = True,
    stored: bool = False,
) -> DocumentCheck:
    """The checks of one document; those across documents are `combine`'s."""
    check = DocumentCheck()
    if not isinstance(document, dict):
        return check
    metadata = document.get("metadata")
    metadata = metadata if isinstance(metadata, dict) else {}
    namespace = str(metadata.get("namespace") or DEFAULT_NAMESPACE)
    name = metadata.get("name")
    where = (file, namespace, str(name or metadata.get("generateName") or "<unnamed>"))

    def at(path: str) -> tuple[int | None, int | None]:
        return (manifest.position(path) if manifest else None) or (None, None)

    def finding(severity: Severity, path: str, message: str, rule: str) -> Finding:
        return Finding(*where, severity, path, message, *at(path), rule)

    near_miss = _near_miss(document)
    if near_miss is not None:
        check.findings.append(finding("warning", *near_miss, Rule.NEAR_MISS))
        return check
    if document.get("kind") != KIND:
        return check
    if document.get("apiVersion") != API_VERSION:
        check.findings.append(
            finding("error", "apiVersion", f"not served; use {API_VERSION}", Rule.UNSERVED_VERSION)
        )
        check.runtime = CheckedRuntime(*where, None, None)
        return check
    defaulted = apply_defaults(document).object
    result = validate_runtime(defaulted, stored=stored)  # defaults the spec again: a no-op walk
    findings = [
        finding(severity, e.path, message, e.rule)
        for e in result.errors
        for severity, message in [_judged(e, stored)]
    ]
    findings += [finding("warning", w.path, w.message, w.rule) for w in result.field_warnings]
    for path, (line, column) in manifest.duplicates if manifest else ():
        findings.append(
            Finding(
                *where, "warning", field_path(path), DUPLICATE_KEY, line, column, Rule.DUPLICATE_KEY
            )
        )
    named = isinstance(name, str) and name != ""
    if named:
        check.named, check.name_at = (namespace, str(name)), at("metadata.name")
    elif name or not (generate_name and metadata.get("generateName")):
        message = "must be a string" if name else "Required value"
        findings.append(finding("error", "metadata.name", message, Rule.NAME_REQUIRED))
    model: TrussiumRuntime | None = None
    if named and result.parsed and not any(f.severity == "error" for f in findings):
        model, problem = result.runtime, result.parsed.runtime_problem
        findings += (
            [finding("error", "metadata", problem, Rule.RUNTIME_METADATA)] if problem else []
        )
    check.findings = findings
    check.runtime = CheckedRuntime(*where, defaulted, model)
    return check


def combine(checks: Iterable[DocumentCheck]) -> OfflineReport:
    """One report from the documents' checks, in order, adding what only a set of files
    shows: the same runtime defined twice."""
    report = OfflineReport()
    first_seen: dict[tuple[str, str], str] = {}
    for check in checks:
        report.findings += check.findings
        if check.runtime is None:
            continue
        report.runtimes.append(check.runtime)
        if check.named is None:
            continue
        if check.named not in first_seen:
            first_seen[check.named] = check.runtime.file
            continue
        namespace, name = check.named
        runtime = check.runtime
        message = (
            f"{namespace}/{name} is also defined in {first_seen[check.named]}; "
            "applying both keeps only the later one"
        )
        report.findings.append(
            Finding(
                runtime.file,
                namespace,
                name,
                "warning",
                "metadata.name",
                message,
                *check.name_at,
                Rule.DUPLICATE_RUNTIME,
            )
        )
    return report


def _similar(value: str, target: str) -> bool:
    if value == target:  # most documents: no need to measure
        return False
    return difflib.SequenceMatcher(None, value.lower(), target.lower()).ratio() >= NEAR_MISS_RATIO


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
