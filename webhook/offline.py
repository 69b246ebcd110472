"""`trussium-webhook validate`: the webhook's verdict on manifest files, without a cluster.

The checks are `common.offline.check_documents`, the same defaulting and
validation as the admission hooks, so a CI job and `kubectl apply` agree.
This module reads the inputs and prints the report in the format a CI
system reads: text for people, JSON, JUnit XML or SARIF.
Exit 0 when every TrussiumRuntime is valid, 1 when any is not (or, with
--strict, has a warning), 2 on usage errors or unreadable input.
"""

import argparse
import json
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, TextIO

import yaml

from cmdline.inputs import Inputs, read_manifests
from cmdline.options import CONFIGURATION_ERROR, fail, package_version
from common.offline import Finding, OfflineReport, check_documents

PROGRAM = "trussium-webhook validate"
OUTPUTS = ("text", "json", "junit", "sarif")
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


@dataclass(frozen=True)
class Run:
    """One validation: what was read, what was found, and the options that judge it."""

    inputs: Inputs
    report: OfflineReport
    strict: bool

    @property
    def exit_code(self) -> int:
        if self.inputs.problems:
            return CONFIGURATION_ERROR
        return 1 if self.report.failing(strict=self.strict) else 0

    def summary(self) -> str:
        """One line with the counts, whatever the verdict."""
        count = {"error": 0, "warning": 0}
        for finding in self.report.findings:
            count[finding.severity] += 1
        runtimes = len(self.report.runtimes)
        invalid = self.report.invalid_runtimes()
        line = (
            f"{runtimes} TrussiumRuntime(s) in {self.inputs.files} file(s): "
            f"{runtimes - invalid} valid, {invalid} invalid; "
            f"{count['error']} error(s), {count['warning']} warning(s)"
        )
        if self.inputs.problems:
            line += f"; {len(self.inputs.problems)} input(s) unreadable"
        return line + ("" if self.exit_code == 0 else " (failed)")


def add_validate_command(subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    parser = subparsers.add_parser(
        "validate",
        help="default and validate TrussiumRuntime manifests without a cluster",
        description="Exit 0: all valid; 1: a violation (or a warning with --strict); "
        "2: usage error or unreadable input. PATH is a file, a folder (searched "
        "recursively for *.yaml, *.yml, *.json) or - for stdin; documents of other "
        "kinds are skipped, kind: List is read item by item.",
    )
    parser.add_argument("paths", nargs="*", metavar="PATH", help="input, as with -f")
    parser.add_argument(
        "-f",
        "--filename",
        action="extend",
        nargs="+",
        default=[],
        metavar="PATH",
        help="one or more inputs; repeatable",
    )
    parser.add_argument(
        "--strict", action="store_true", help="fail on warnings too (near-miss kinds included)"
    )
    parser.add_argument(
        "--stored",
        action="store_true",
        help="judge the objects as runtimes already stored in a cluster (the migration "
        "preflight): a rule the operator tolerates on a stored runtime is a warning saying "
        "what the operator does; only rules that stop it reconciling the runtime fail",
    )
    parser.add_argument("-o", "--output", choices=OUTPUTS, default="text")
    parser.add_argument(
        "--print-defaulted",
        action="store_true",
        help="print the defaulted objects (text output: as YAML on stdout, findings on stderr; "
        "json output: in a 'defaulted' list)",
    )
    parser.set_defaults(handler=run_validate)


def run_validate(args: argparse.Namespace) -> int:
    paths = [*args.filename, *args.paths]
    if not paths:
        return fail(PROGRAM, "give at least one PATH (a file, a folder, or - for stdin)")
    inputs = read_manifests(paths, sys.stdin)
    run = Run(inputs, check_documents(inputs.documents, stored=args.stored), args.strict)
    WRITERS[args.output](run, args.print_defaulted, sys.stdout)
    return run.exit_code


def _write_text(run: Run, print_defaulted: bool, out: TextIO) -> None:
    report_out = sys.stderr if print_defaulted else out
    for problem in run.inputs.problems:
        print(problem, file=sys.stderr)
    for finding in run.report.findings:
        print(finding, file=report_out)
    if print_defaulted:
        yaml.safe_dump_all(_defaulted(run), out, sort_keys=False)
    print(run.summary(), file=report_out)


def _defaulted(run: Run) -> list[dict[str, Any]]:
    return [r.defaulted for r in run.report.runtimes if r.defaulted is not None]


def _write_json(run: Run, print_defaulted: bool, out: TextIO) -> None:
    findings = run.report.findings
    document: dict[str, Any] = {
        "valid": run.exit_code == 0,
        "summary": run.summary(),
        "files": run.inputs.files,
        "runtimes": len(run.report.runtimes),
        "errors": [asdict(f) for f in findings if f.severity == "error"],
        "warnings": [asdict(f) for f in findings if f.severity == "warning"],
        "problems": [asdict(problem) for problem in run.inputs.problems],
    }
    if print_defaulted:
        document["defaulted"] = _defaulted(run)
    json.dump(document, out, indent=2)
    out.write("\n")


def _write_junit(run: Run, _: bool, out: TextIO) -> None:
    """One test case per object (classname: the file, name: namespace/name)."""
    cases: dict[tuple[str, str], list[Finding]] = {}
    for runtime in run.report.runtimes:
        cases.setdefault((runtime.file, f"{runtime.namespace}/{runtime.name}"), [])
    for finding in run.report.findings:
        cases.setdefault((finding.file, f"{finding.namespace}/{finding.name}"), []).append(finding)
    suite = ET.Element("testsuite", name=PROGRAM)
    failures = 0
    for (file, name), found in cases.items():
        case = ET.SubElement(suite, "testcase", classname=file, name=name)
        failing = [f for f in found if f.severity == "error" or run.strict]
        if failing:
            failures += 1
            failure = ET.SubElement(
                case, "failure", type="invalid", message=f"{len(failing)} problem(s)"
            )
            failure.text = "\n".join(str(f) for f in failing)
        if passing := [f for f in found if f not in failing]:
            ET.SubElement(case, "system-out").text = "\n".join(str(f) for f in passing)
    for problem in run.inputs.problems:
        case = ET.SubElement(suite, "testcase", classname=problem.file, name="read")
        ET.SubElement(case, "error", type="unreadable", message=problem.reason)
    suite.set("tests", str(len(cases) + len(run.inputs.problems)))
    suite.set("failures", str(failures))
    suite.set("errors", str(len(run.inputs.problems)))
    ET.SubElement(suite, "system-out").text = run.summary()
    ET.indent(suite)
    out.write(ET.tostring(suite, encoding="unicode", xml_declaration=True) + "\n")


_SARIF_RULES = {
    "invalid": "a TrussiumRuntime the API server or the webhook would reject",
    "warning": "a TrussiumRuntime kubectl apply accepts with a warning, or a near miss",
    "unreadable": "an input that is not readable YAML or JSON",
}


def _write_sarif(run: Run, _: bool, out: TextIO) -> None:
    """SARIF 2.1.0 for code-scanning tools; locations name the file (no line numbers)."""
    results = [
        {
            "ruleId": "invalid" if finding.severity == "error" else "warning",
            "level": "error" if finding.severity == "error" or run.strict else "warning",
            "message": {"text": str(finding).removeprefix(f"{finding.file}: ")},
            "locations": [
                {
                    "physicalLocation": {"artifactLocation": {"uri": finding.file}},
                    "logicalLocations": [
                        {"fullyQualifiedName": f"{finding.namespace}/{finding.name}"}
                    ],
                }
            ],
        }
        for finding in run.report.findings
    ]
    results += [
        {
            "ruleId": "unreadable",
            "level": "error",
            "message": {"text": problem.reason},
            "locations": [{"physicalLocation": {"artifactLocation": {"uri": problem.file}}}],
        }
        for problem in run.inputs.problems
    ]
    rules = [
        {"id": rule, "shortDescription": {"text": text}} for rule, text in _SARIF_RULES.items()
    ]
    driver = {"name": PROGRAM, "version": package_version(), "rules": rules}
    document = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [{"tool": {"driver": driver}, "results": results}],
    }
    json.dump(document, out, indent=2)
    out.write("\n")


WRITERS: dict[str, Callable[[Run, bool, TextIO], None]] = {
    "text": _write_text,
    "json": _write_json,
    "junit": _write_junit,
    "sarif": _write_sarif,
}
