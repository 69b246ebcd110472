"""`make demo ONCE=1` end to end: the newcomer's first command must work."""

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DEMO_TIMEOUT_SECONDS = 600


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
        "Upgrading=True reason=UpgradeInProgress",
        "UpgradeComplete",
        "RuntimeUpgradeCompleted",
        "spec.provider.baseURL",
        "would apply: ConfigMap, ServiceAccount, Service, Deployment, PodDisruptionBudget, "
        "NetworkPolicy",
        "Every step behaved as expected.",
    ):
        assert expected in output, f"{expected!r} missing from the demo output:\n{output[-6000:]}"
    leftovers = subprocess.run(
        ["pgrep", "-f", "devcluster-cluster-"], capture_output=True, text=True, check=False
    ).stdout.split()
    assert leftovers == [], f"processes left behind: {leftovers}"
