"""`trussium-webhook validate`: the webhook's verdict on manifest files, without a cluster.

The same `apply_defaults` and `validate_runtime` as the admission hooks, so a
CI job and `kubectl apply` agree. Exit 0 when every TrussiumRuntime is valid,
1 when any is not (or, with --strict, has a warning), 2 on usage or parse
errors. Documents of other kinds are skipped.
"""

import argparse
import json
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal, TextIO

import yaml

from common.constants import API_VERSION, GROUP, KIND
from common.defaulting import apply_defaults
from common.manifests import ManifestError, parse_manifests
from common.validation import validate_runtime

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")
STDIN = "-"


@dataclass(frozen=True)
class Finding:
    file: str
    namespace: str
    name: str
    severity: Literal["error", "warning"]
    message: str
    field: str = ""

    def __str__(self) -> str:
        where = (
            f"{self.field}: " if self.field else "warning: " if self.severity == "warning" else ""
        )
        return f"{self.file}: {self.namespace}/{self.name}: {where}{self.message}"


@dataclass
class Report:
    runtimes: int = 0
    findings: list[Finding] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # unreadable input: exit 2
    defaulted: list[dict[str, Any]] = field(default_factory=list)

    def exit_code(self, *, strict: bool) -> int:
        if self.problems:
            return 2
        failing = {"error", "warning"} if strict else {"error"}
        return 1 if any(finding.severity in failing for finding in self.findings) else 0


def check_documents(file: str, documents: Iterable[object], report: Report) -> None:
    """Default and validate every TrussiumRuntime among `documents` into `report`."""
    for document in documents:
        if not isinstance(document, dict) or document.get("kind") != KIND:
            continue
        api_version = str(document.get("apiVersion", ""))
        if not api_version.startswith(f"{GROUP}/"):
            continue
        metadata = document.get("metadata")
        metadata = metadata if isinstance(metadata, dict) else {}
        namespace = str(metadata.get("namespace") or "default")
        name = str(metadata.get("name") or metadata.get("generateName") or "<unnamed>")
        report.runtimes += 1
        if api_version != API_VERSION:
            report.findings.append(
                Finding(
                    file, namespace, name, "error", f"not served; use {API_VERSION}", "apiVersion"
                )
            )
            continue
        defaulted = apply_defaults(document).object
        report.defaulted.append(defaulted)
        result = validate_runtime(defaulted)
        report.findings.extend(
            Finding(file, namespace, name, "error", error.message, error.path)
            for error in result.errors
        )
        report.findings.extend(
            Finding(file, namespace, name, "warning", warning) for warning in result.warnings
        )


def manifest_files(paths: Sequence[str], report: Report) -> Iterator[tuple[str, Path | None]]:
    """(label, path) per input; a folder yields its manifests recursively, `-` is stdin."""
    for given in paths:
        if given == STDIN:
            yield "<stdin>", None
            continue
        path = Path(given)
        if path.is_dir():
            yield from (
                (str(found), found)
                for found in sorted(path.rglob("*"))
                if found.suffix in MANIFEST_SUFFIXES and found.is_file()
            )
        elif path.is_file():
            yield given, path
        else:
            report.problems.append(f"{given}: no such file or folder")


def validate_paths(paths: Sequence[str], stdin: TextIO) -> Report:
    report = Report()
    for label, path in manifest_files(paths, report):
        try:
            text = stdin.read() if path is None else path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            report.problems.append(f"{label}: cannot read: {error}")
            continue
        try:
            documents = parse_manifests(text, label)
        except ManifestError as error:
            report.problems.append(str(error))
            continue
        check_documents(label, documents, report)
    return report


def add_validate_command(subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    parser = subparsers.add_parser(
        "validate",
        help="default and validate TrussiumRuntime manifests without a cluster",
        description="Exit 0: all valid; 1: a violation (or a warning with --strict); "
        "2: usage or parse error.",
    )
    parser.add_argument(
        "-f",
        "--filename",
        action="append",
        required=True,
        metavar="PATH",
        help="file, folder (recursive: *.yaml, *.yml, *.json) or - for stdin; repeatable",
    )
    parser.add_argument("--strict", action="store_true", help="fail on warnings too")
    parser.add_argument("-o", "--output", choices=("text", "json"), default="text")
    parser.add_argument(
        "--print-defaulted",
        action="store_true",
        help="print the defaulted objects (text output: as YAML on stdout, findings on stderr)",
    )
    parser.set_defaults(handler=run_validate)


def run_validate(args: argparse.Namespace) -> int:
    report = validate_paths(args.filename, sys.stdin)
    code = report.exit_code(strict=args.strict)
    if args.output == "json":
        document: dict[str, Any] = {
            "valid": code == 0,
            "runtimes": report.runtimes,
            "errors": [asdict(f) for f in report.findings if f.severity == "error"],
            "warnings": [asdict(f) for f in report.findings if f.severity == "warning"],
            "problems": report.problems,
        }
        if args.print_defaulted:
            document["defaulted"] = report.defaulted
        json.dump(document, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return code
    findings_out = sys.stderr if args.print_defaulted else sys.stdout
    for problem in report.problems:
        print(problem, file=sys.stderr)
    for finding in report.findings:
        print(finding, file=findings_out)
    if args.print_defaulted:
        yaml.safe_dump_all(report.defaulted, sys.stdout, sort_keys=False)
    if code == 0 and not args.print_defaulted:
        print(f"{report.runtimes} TrussiumRuntime(s) valid")
    return code
