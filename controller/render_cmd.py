"""`trussium-controller render -f FILE`: preview the objects the operator would apply.

The same defaulting, validation and rendering as the running controller, so
a user can review or diff a change before applying it. Exit 0 with the
objects on stdout, 1 on a validation error, 2 when the input cannot be read.
"""

import argparse
from pathlib import Path
from typing import Any, TextIO

import yaml
from pydantic import ValidationError

from common.api import TrussiumRuntime
from common.manifests import ManifestError, parse_manifests
from common.render import render_managed_objects
from webhook.offline import STDIN, Finding, Report, check_documents

DESCRIPTION = (
    "Print, as multi-document YAML in apply order, the objects the operator would "
    "create for each TrussiumRuntime in FILE (other kinds are skipped). Defaults are "
    "applied and the manifest is validated first. An owner reference carries the "
    "runtime's uid only when the manifest has metadata.uid (as `kubectl get -o yaml` "
    "output does); with autoscaling on, replicas shows the count used on creation. "
    "Exit 0: rendered; 1: validation error; 2: unreadable input."
)


def add_render_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = DESCRIPTION
    parser.add_argument(
        "-f", "--filename", required=True, metavar="FILE", help="manifest file, '-' for stdin"
    )


def _read(path: str, stdin: TextIO) -> tuple[str, str]:
    """(label for messages, text); OSError or UnicodeDecodeError when unreadable."""
    if path == STDIN:
        return "<stdin>", stdin.read()
    return path, Path(path).read_text(encoding="utf-8")


def _runtime(label: str, defaulted: dict[str, Any]) -> TrussiumRuntime | Finding:
    """The model to render from a valid manifest, or why it cannot be rendered."""
    metadata = defaulted.get("metadata") or {}
    namespace = str(metadata.get("namespace") or "default")
    name = metadata.get("name")
    if not name:
        name = str(metadata.get("generateName") or "<unnamed>")
        return Finding(
            label, namespace, name, "error", "a name is needed to render", "metadata.name"
        )
    try:
        return TrussiumRuntime.model_validate(
            {key: value for key, value in defaulted.items() if key != "status"}
        )
    except ValidationError as error:
        problems = "; ".join(e["msg"] for e in error.errors(include_url=False))
        return Finding(label, namespace, str(name), "error", problems, "metadata")


def run_render(path: str, stdout: TextIO, stderr: TextIO, stdin: TextIO) -> int:
    try:
        label, text = _read(path, stdin)
    except (OSError, UnicodeDecodeError) as error:
        print(f"{path}: cannot read: {error}", file=stderr)
        return 2
    try:
        documents = parse_manifests(text, label)
    except ManifestError as error:
        print(error, file=stderr)
        return 2
    report = Report()
    check_documents(label, documents, report)
    runtimes: list[TrussiumRuntime] = []
    if not any(finding.severity == "error" for finding in report.findings):
        for defaulted in report.defaulted:
            outcome = _runtime(label, defaulted)
            if isinstance(outcome, Finding):
                report.findings.append(outcome)
            else:
                runtimes.append(outcome)
    for finding in report.findings:
        print(finding, file=stderr)
    if report.exit_code(strict=False):
        return 1
    if not runtimes:
        print(f"{label}: no TrussiumRuntime to render", file=stderr)
    objects = [obj for runtime in runtimes for obj in render_managed_objects(runtime)]
    yaml.safe_dump_all(objects, stdout, sort_keys=False)
    return 0
