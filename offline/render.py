"""`trussium-controller render -f PATH`: preview the objects the operator would apply.

The offline check (`offline.checks`) and rendering (`common.render`) are the
running controller's, so a user can review or diff a change before applying
it. Exit 0 with the objects on stdout, 1 on a validation error (nothing is
printed then), 2 when the input cannot be read.
"""

import argparse
import json
from collections.abc import Sequence
from typing import TextIO

import yaml

from trussium_operator.cmdline.options import CONFIGURATION_ERROR
from trussium_operator.controller.runtime.kinds import render_managed_objects
from trussium_operator.offline.checks import check_documents
from trussium_operator.offline.inputs import read_manifests

DESCRIPTION = (
    "Print, in apply order, the objects the operator would create for each "
    "TrussiumRuntime in the inputs (other kinds are skipped). Defaults are applied and "
    "the manifests are validated first. An owner reference carries the runtime's uid "
    "only when the manifest has metadata.uid (as `kubectl get -o yaml` output does); "
    "with autoscaling on, replicas shows the count used on creation. "
    "Exit 0: rendered; 1: validation error; 2: unreadable input."
)


def add_render_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = DESCRIPTION
    parser.add_argument(
        "-f",
        "--filename",
        action="extend",
        nargs="+",
        required=True,
        metavar="PATH",
        help="manifest file, folder (recursive: *.yaml, *.yml, *.json) or - for stdin; repeatable",
    )
    parser.add_argument(
        "-o",
        "--output",
        choices=("yaml", "json"),
        default="yaml",
        help="yaml: one document per object; json: one List object (kubectl apply reads both)",
    )


def run_render(
    paths: Sequence[str], output: str, stdout: TextIO, stderr: TextIO, stdin: TextIO
) -> int:
    inputs = read_manifests(paths, stdin)
    unusable = [*inputs.problems, *inputs.skipped]  # a template cannot be rendered as it is
    for problem in unusable:
        print(problem, file=stderr)
    if unusable:
        return CONFIGURATION_ERROR
    report = check_documents(inputs.documents, generate_name=False)
    for finding in report.findings:
        print(finding, file=stderr)
    if report.failing(strict=False):
        return 1
    if not report.runtimes:
        print(f"{', '.join(paths)}: no TrussiumRuntime to render", file=stderr)
    models = [runtime.model for runtime in report.runtimes if runtime.model is not None]
    objects = [obj for model in models for obj in render_managed_objects(model)]
    if output == "json":
        json.dump({"apiVersion": "v1", "kind": "List", "items": objects}, stdout, indent=2)
        stdout.write("\n")
    else:
        yaml.safe_dump_all(objects, stdout, sort_keys=False)
    return 0
