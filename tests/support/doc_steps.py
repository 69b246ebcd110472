"""The shell blocks of a Markdown document marked `<!-- step: NAME -->`, and how a
user runs them: the tests run the documented commands verbatim, so the docs
cannot drift from what works."""

import os
import re
import subprocess
import sys
from pathlib import Path

from devcluster import ControlPlane

REPO = Path(__file__).resolve().parents[2]
STEP = re.compile(r"<!-- step: ([a-z0-9-]+) -->\n```sh\n(.*?)```", re.DOTALL)
SH_BLOCK = re.compile(r"(<!-- step: [a-z0-9-]+ -->\n)?```sh\n(.*?)```", re.DOTALL)


def steps(document: Path, **placeholders: str) -> dict[str, str]:
    """Each `<!-- step: NAME -->` block, with `<go-namespace>` and the like replaced
    (keyword go_namespace fills `<go-namespace>`)."""
    found = dict(STEP.findall(document.read_text()))
    for key, value in placeholders.items():
        placeholder = f"<{key.replace('_', '-')}>"
        found = {name: text.replace(placeholder, value) for name, text in found.items()}
    return found


def unmarked_blocks(document: Path, section: str = "") -> list[str]:
    """The `sh` blocks (of the `## section`, when given) with no step marker."""
    text = document.read_text()
    if section:
        text = text.split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    return [block for marker, block in SH_BLOCK.findall(text) if not marker]


def run_step(
    plane: ControlPlane, script: str, cwd: Path = REPO, timeout: float = 600.0
) -> tuple[int, str]:
    """Run one block with bash, as a user with this plane's kubeconfig and tools on PATH."""
    path = os.pathsep.join(
        [str(plane.bin_dir), str(Path(sys.executable).parent), os.environ["PATH"]]
    )
    env = {**os.environ, "KUBECONFIG": str(plane.kubeconfig), "PATH": path}
    answer = subprocess.run(
        ["bash", "-o", "pipefail", "-ec", script],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return answer.returncode, answer.stdout + answer.stderr
