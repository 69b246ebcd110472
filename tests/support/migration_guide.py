"""The blocks of docs/migration-from-go-operator.md, and how a user runs them."""

import os
import re
import subprocess
import sys
from pathlib import Path

from devcluster import ControlPlane

REPO = Path(__file__).resolve().parents[2]
GUIDE = REPO / "docs" / "migration-from-go-operator.md"
STEP = re.compile(r"<!-- step: ([a-z-]+) -->\n```sh\n(.*?)```", re.DOTALL)


def guide_steps(**placeholders: str) -> dict[str, str]:
    """Each `<!-- step: NAME -->` block, with `<go-namespace>` and the like replaced
    (keyword go_namespace fills `<go-namespace>`)."""
    steps = dict(STEP.findall(GUIDE.read_text()))
    for key, value in placeholders.items():
        placeholder = f"<{key.replace('_', '-')}>"
        steps = {name: text.replace(placeholder, value) for name, text in steps.items()}
    return steps


def run_step(plane: ControlPlane, script: str) -> tuple[int, str]:
    """Run one block of the guide with bash, as a user with this plane's kubeconfig."""
    path = os.pathsep.join(
        [str(plane.bin_dir), str(Path(sys.executable).parent), os.environ["PATH"]]
    )
    env = {**os.environ, "KUBECONFIG": str(plane.kubeconfig), "PATH": path}
    answer = subprocess.run(
        ["bash", "-o", "pipefail", "-ec", script],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    return answer.returncode, answer.stdout + answer.stderr
