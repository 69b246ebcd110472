"""`make demo` on a cluster the user gives (`TRUSSIUM_CLUSTER=kubeconfig`). No kind
here: the node plane poses as that cluster, its containerd holding the operator and
stand-in runtime images as `kind load image-archive` of `make image`'s tarballs
would leave a kind node. The demo knows only the kubeconfig; it installs the chart,
runs every step with real pods, and removes what it created except the CRD."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from devcluster import ControlPlane, polling
from devcluster.node import build_image
from hack.demo_release import RELEASE
from tests.node.runtime_image import import_standin

# About 90 s of real pods on top of the node tier, past what CI gives one proof.
OPT_IN = "TRUSSIUM_DEMO_ON_NODE"
pytestmark = [
    pytest.mark.node,
    pytest.mark.skipif(os.environ.get(OPT_IN) != "1", reason=f"about 90 s; {OPT_IN}=1 runs it"),
]
REPO = Path(__file__).resolve().parents[2]
DEMO_TIMEOUT_SECONDS = 900
GONE_SECONDS = 120.0


def test_the_demo_runs_on_the_cluster_of_kubeconfig(plane: ControlPlane, tmp_path: Path) -> None:
    plane.node.import_image(build_image("operator"))
    import_standin(plane)
    given = tmp_path / "given.kubeconfig"
    given.write_bytes(plane.kubeconfig.read_bytes())
    env = os.environ | {"TRUSSIUM_CLUSTER": "kubeconfig", "KUBECONFIG": str(given)}
    result = subprocess.run(
        [sys.executable, "-m", "hack.demo", "--once"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=DEMO_TIMEOUT_SECONDS,
        check=False,
    )  # fmt: skip
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-6000:]
    for expected in (
        f"[1/6] Reaching the cluster of {given}",
        "image ghcr.io/trussiumhq/trussium-operator-python:",
        "RuntimeReady",
        "RuntimeUpgradeCompleted",
        "spec.provider.baseURL",
        "[6/6]",
        "Every step behaved as expected.",
    ):
        assert expected in output, f"{expected!r} missing from the demo output:\n{output[-6000:]}"
    assert plane.helm("status", RELEASE, "-n", RELEASE, check=False).returncode != 0
    for namespace in ("demo", RELEASE):
        polling.wait_for(
            lambda n=namespace: plane.kubectl("get", "namespace", n, check=False).returncode,  # type: ignore[misc]
            f"namespace {namespace} gone",
            GONE_SECONDS,
        )
    plane.kubectl("get", "crd", "trussiumruntimes.runtime.trussium.io")
