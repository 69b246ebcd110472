"""`validate ... | head -1`: the validator ends quietly when the reader closes the pipe.

A real pipe between two processes: `head` exits after its first line while the
validator still has most of its report to write (far more than a pipe holds),
so the validator's next write finds the pipe closed. Without PYTHONUNBUFFERED:
with it, Python's unbuffered text stream drops the rest of a write the pipe
took only in part, without an error, so a report written at once (JUnit) ends
with 0 instead.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from trussium_operator.cmdline.pipes import CLOSED_PIPE

REPO = Path(__file__).resolve().parents[2]
RUNTIME = yaml.safe_load((REPO / "tests" / "samples" / "valid" / "latest-tag.yaml").read_text())


@pytest.fixture(scope="module")
def many(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A List of runtimes, each with a warning: a report of several hundred KiB."""
    items = [{**RUNTIME, "metadata": {"name": f"r{i}", "namespace": "team"}} for i in range(800)]
    path = tmp_path_factory.mktemp("pipes") / "many.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))
    return path


@pytest.mark.parametrize("output", ["text", "json", "junit", "sarif"])
def test_a_closed_pipe_ends_the_command_quietly(many: Path, output: str) -> None:
    validate = subprocess.Popen(
        [sys.executable, "-m", "trussium_operator.webhook.cli", "validate", "-o", output, many],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"},
    )
    assert validate.stdout is not None
    assert validate.stderr is not None
    head = subprocess.Popen(["head", "-1"], stdin=validate.stdout, stdout=subprocess.PIPE)
    validate.stdout.close()  # only head reads the pipe, as in a shell's pipeline
    first, _ = head.communicate(timeout=120)
    assert validate.wait(timeout=120) == CLOSED_PIPE == 141
    assert validate.stderr.read() == b""
    assert len(first.splitlines()) == 1
