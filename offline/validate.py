"""`trussium-webhook validate`: the webhook's verdict on manifest files, without a cluster.

The checks are `offline.checks.check_documents`, the same defaulting and
validation as the admission hooks, so a CI job and `kubectl apply` agree.
This module reads the inputs, on every core for large sets of files (a
process per core, forked after the imports), and prints the report in the
format a CI system reads: text for people, JSON, JUnit XML or SARIF.
Exit 0 when every TrussiumRuntime is valid, 1 when any is not (or, with
--strict, has a warning), 2 on usage errors or unreadable input (and, with
--fail-on-skipped, on Helm templates and files with custom tags); 141 when the
reader closes standard output first (`cmdline.pipes`).
"""

import argparse
import gc
import json
import os
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from typing import Any, TextIO

import yaml

from trussium_operator.cmdline.options import CONFIGURATION_ERROR, fail, package_version
from trussium_operator.cmdline.pipes import closed_pipe
from trussium_operator.common.rules import CATALOGUE, RULES_DOC, Rule
from trussium_operator.offline.checks import (
    DocumentCheck,
    Finding,
    OfflineReport,
    check_document,
    combine,
)
from trussium_operator.offline.inputs import (
    MAX_FILE_MIB,
    Input,
    Inputs,
    Unreadable,
    find_inputs,
    read_inputs,
)
from trussium_operator.offline.kustomize import as_patch, without_directives

PROGRAM = "trussium-webhook validate"
OUTPUTS = ("text", "json", "junit", "sarif")
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
# Below this many files per process, forking costs more than it saves.
FILES_PER_PROCESS = 100
# Files read before they are checked: reading a batch, then checking it, is faster than
# alternating file by file; holding every file's objects until all are read costs memory.
FILES_PER_BATCH = 100
# Allocations between two young collections of the garbage collector while checking
# (Python's default: 700).
GC_YOUNG_THRESHOLD = 20_000


@dataclass(frozen=True)
class Run:
    """One validation: what was read, what was found, and the options that judge it."""

    inputs: Inputs
    report: OfflineReport
    strict: bool
    fail_on_skipped: bool = False
    docs_url: str = RULES_DOC

    @property
    def exit_code(self) -> int:
        templates = len(self.inputs.skipped) - len(self.inputs.kustomize)
        if self.inputs.problems or (self.fail_on_skipped and templates):
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
        if templates := len(self.inputs.skipped) - len(self.inputs.kustomize):
            line += f"; {templates} skipped (templates or custom tags)"
        if self.inputs.kustomize:
            line += f"; {len(self.inputs.kustomize)} kustomize file(s) skipped"
        return line + ("" if self.exit_code == 0 else " (failed)")


def add_validate_command(subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    parser = subparsers.add_parser(
        "validate",
        help="default and validate TrussiumRuntime manifests without a cluster",
        description="Exit 0: all valid; 1: a violation (or a warning with --strict); "
        "2: usage error or unreadable input. PATH is a file, a folder (searched "
        "recursively for *.yaml, *.yml, *.json, leaving out .git, node_modules and other "
        "version-control folders) or - for stdin; documents of other kinds are skipped, "
        "kind: List is read item by item. Helm templates and files with custom tags are "
        "skipped with a notice.",
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
    parser.add_argument(
        "--ignore-filename-pattern",
        action="append",
        default=[],
        type=_pattern,
        metavar="REGEX",
        help="leave out files whose path matches REGEX (searched, not anchored); repeatable",
    )
    parser.add_argument(
        "--fail-on-skipped",
        action="store_true",
        help="exit 2 on a Helm template or a file with custom tags instead of skipping it",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1,
        metavar="N",
        help="processes reading and checking files (default: the usable CPUs; "
        f"one per {FILES_PER_PROCESS} files at most)",
    )
    parser.add_argument(
        "--max-file-mib",
        type=int,
        default=MAX_FILE_MIB,
        metavar="MIB",
        help=f"refuse (exit 2) a file or standard input larger than MIB mebibytes, unread "
        f"(default: {MAX_FILE_MIB})",
    )
    parser.add_argument("-o", "--output", choices=OUTPUTS, default="text")
    parser.add_argument(
        "--rules-doc-url",
        default=RULES_DOC,
        metavar="URL",
        help="where the rules are explained, for the help link of each SARIF rule "
        f"(default: {RULES_DOC}, relative to the repository; give the absolute URL of that "
        "file in the operator's sources or docs site)",
    )
    parser.add_argument(
        "--print-defaulted",
        action="store_true",
        help="print the defaulted objects (text output: as YAML on stdout, findings on stderr; "
        "json output: in a 'defaulted' list)",
    )
    parser.set_defaults(handler=run_validate)


def _pattern(text: str) -> re.Pattern[str]:
    try:
        return re.compile(text)
    except re.error as error:
        raise argparse.ArgumentTypeError(f"not a regular expression: {error}") from None


def run_validate(args: argparse.Namespace) -> int:
    paths = [*args.filename, *args.paths]
    if not paths:
        return fail(PROGRAM, "give at least one PATH (a file, a folder, or - for stdin)")
    if args.jobs < 1:
        return fail(PROGRAM, "--jobs must be at least 1")
    if args.max_file_mib < 1:
        return fail(PROGRAM, "--max-file-mib must be at least 1")
    files, missing = find_inputs(paths, args.ignore_filename_pattern)
    inputs, checks = Inputs(files=len(missing), problems=missing), []
    with _collector_for_checking():
        for chunk_inputs, chunk_checks in _check_files(
            files, args.jobs, args.print_defaulted, args.stored, args.max_file_mib
        ):
            inputs.extend(chunk_inputs)
            checks += chunk_checks
    run = Run(inputs, combine(checks), args.strict, args.fail_on_skipped, args.rules_doc_url)
    try:
        WRITERS[args.output](run, args.print_defaulted, sys.stdout)
        sys.stdout.flush()
    except BrokenPipeError:  # the reader closed the pipe (`| head -1`): end as Unix tools do
        return closed_pipe()
    return run.exit_code


Checked = tuple[Inputs, list[DocumentCheck]]


@contextmanager
def _collector_for_checking() -> Iterator[None]:
    """The garbage collector set for checking files, as it was again after.

    What exists before (the imports) lives to the end, so collections skip
    it, and forked processes share its memory instead of copying each page a
    collection would touch; young collections are rarer, as checking builds
    many objects that last to the report and few reference cycles.
    """
    threshold = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(GC_YOUNG_THRESHOLD)
    try:
        yield
    finally:
        gc.set_threshold(*threshold)
        gc.unfreeze()


def _check_files(
    files: list[Input], jobs: int, keep_defaulted: bool, stored: bool, max_mib: int
) -> list[Checked]:
    """Read and check `files`, in order, in up to `jobs` processes: this one takes the
    first chunk while forked ones take the rest, so only their results are pickled."""
    processes = min(jobs, len(files) // FILES_PER_PROCESS)
    on_disk = all(path is not None for _, path in files)
    if processes < 2 or not on_disk:
        return [_check_chunk(files, keep_defaulted, stored, max_mib)]
    import multiprocessing  # imported when it forks: a few files' run does without it

    if "fork" not in multiprocessing.get_all_start_methods():
        return [_check_chunk(files, keep_defaulted, stored, max_mib)]
    size = -(-len(files) // processes)
    chunks = [
        (files[i : i + size], keep_defaulted, stored, max_mib) for i in range(0, len(files), size)
    ]
    with multiprocessing.get_context("fork").Pool(len(chunks) - 1) as pool:
        others = pool.starmap_async(_check_chunk, chunks[1:])
        first = _check_chunk(*chunks[0])
        return [first, *others.get()]


def _check_chunk(files: list[Input], keep_defaulted: bool, stored: bool, max_mib: int) -> Checked:
    """Files read and checked a batch at a time, so only a batch's objects are held at once:
    the report needs only the checks (and the defaulted objects when it prints them)."""
    inputs, checks = Inputs(), []
    for start in range(0, len(files), FILES_PER_BATCH):
        batch = read_inputs(files[start : start + FILES_PER_BATCH], sys.stdin, max_mib)
        for file, m in batch.manifests:
            check = (
                as_patch(check_document(file, without_directives(m.object), m, stored=stored))
                if file in batch.patches
                else check_document(file, m.object, m, stored=stored)
            )
            if check.runtime is not None and not keep_defaulted:
                check.runtime = replace(check.runtime, defaulted=None, model=None)
            checks.append(check)
        batch.manifests = []
        inputs.extend(batch)
    return inputs, checks


def _write_text(run: Run, print_defaulted: bool, out: TextIO) -> None:
    report_out = sys.stderr if print_defaulted else out
    for problem in [*run.inputs.problems, *run.inputs.skipped]:
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
        "skipped": [asdict(skipped) for skipped in run.inputs.skipped],
    }
    if print_defaulted:
        document["defaulted"] = _defaulted(run)
    json.dump(document, out, indent=2)
    out.write("\n")


def _write_junit(run: Run, _: bool, out: TextIO) -> None:
    """One test case per object (classname: the file, name: namespace/name)."""
    import xml.etree.ElementTree as ET  # only this output needs it

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
    for skipped in run.inputs.skipped:
        case = ET.SubElement(suite, "testcase", classname=skipped.file, name="read")
        ET.SubElement(case, "skipped", message=skipped.reason)
    suite.set("tests", str(len(cases) + len(run.inputs.problems) + len(run.inputs.skipped)))
    suite.set("skipped", str(len(run.inputs.skipped)))
    suite.set("failures", str(failures))
    suite.set("errors", str(len(run.inputs.problems)))
    ET.SubElement(suite, "system-out").text = run.summary()
    ET.indent(suite)
    out.write(ET.tostring(suite, encoding="unicode", xml_declaration=True) + "\n")


def _sarif_location(file: str, line: int | None, column: int | None) -> dict[str, Any]:
    """The file, and the line and column when the parser gave them."""
    location: dict[str, Any] = {"artifactLocation": {"uri": file}}
    if line is not None:
        location["region"] = {"startLine": line} | ({"startColumn": column} if column else {})
    return location


def _sarif_rules(docs_url: str) -> list[dict[str, Any]]:
    """Every rule of the catalogue, each with its section of the rules document."""
    return [
        {
            "id": rule,
            "shortDescription": {"text": doc.summary},
            "helpUri": f"{docs_url}#{doc.anchor}",
        }
        for rule, doc in CATALOGUE.items()
    ]


def _write_sarif(run: Run, _: bool, out: TextIO) -> None:
    """SARIF 2.1.0 for code-scanning tools: each result names the rule it breaks; regions
    point at the field (or where parsing stopped), logical locations name the object."""
    results = [
        {
            "ruleId": finding.rule,
            "level": "error" if finding.severity == "error" or run.strict else "warning",
            "message": {"text": str(finding).removeprefix(f"{finding.file}: ")},
            "locations": [
                {
                    "physicalLocation": _sarif_location(finding.file, finding.line, finding.column),
                    "logicalLocations": [
                        {"fullyQualifiedName": f"{finding.namespace}/{finding.name}"}
                    ],
                }
            ],
        }
        for finding in run.report.findings
    ]
    read_results: list[tuple[str, str, Unreadable]] = [
        (Rule.UNREADABLE, "error", problem) for problem in run.inputs.problems
    ]
    read_results += [
        (Rule.SKIPPED, "error" if run.fail_on_skipped and template else "note", skipped)
        for skipped in run.inputs.skipped
        for template in [skipped not in run.inputs.kustomize]
    ]
    results += [
        {
            "ruleId": rule,
            "level": level,
            "message": {"text": item.reason},
            "locations": [{"physicalLocation": _sarif_location(item.file, item.line, item.column)}],
        }
        for rule, level, item in read_results
    ]
    driver = {
        "name": PROGRAM,
        "version": package_version(),
        "rules": _sarif_rules(run.docs_url),
    }
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
