"""`make demo ONCE=1` end to end: the newcomer's first command must work."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DEMO_TIMEOUT_SECONDS = 600


@pytest.mark.cluster
@pytest.mark.own_plane("the demo's own local control plane (it checks that nothing of it is left)")
def test_demo_runs_every_step_and_leaves_nothing_behind() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "hack.demo", "--once"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=DEMO_TIMEOUT_SECONDS,
        check=False,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-6000:]
    for expected in (
        "[7/7]",
        "RuntimeReady",
        "RuntimeUpgradeStarted",
        "UpgradeComplete",
        "RuntimeUpgradeCompleted",
        "spec.provider.baseURL",
        "would apply: ConfigMap, ServiceAccount, Service, Deployment, PodDisruptionBudget, "
        "NetworkPolicy",
        "Every step behaved as expected.",
    ):
        assert expected in output, f"{expected!r} missing from the demo output:\n{output[-6000:]}"
    plane_dir = re.search(r"kubeconfig (/\S+)/admin\.kubeconfig", output)
    assert plane_dir, output[:2000]
    leftovers = subprocess.run(
        ["pgrep", "-f", plane_dir.group(1)], capture_output=True, text=True, check=False
    ).stdout.split()
    assert leftovers == [], f"processes of the demo's plane left behind: {leftovers}"
    assert not Path(plane_dir.group(1)).exists()
