"""What `kubectl get -o yaml` prints validates offline: the migration preflight relies on it."""

import subprocess
import sys
from pathlib import Path

import pytest

from devcluster import ControlPlane
from devcluster.hostoperator import install_crds

REPO = Path(__file__).resolve().parents[2]
VALIDATE = [str(Path(sys.executable).parent / "trussium-webhook"), "validate"]


@pytest.mark.api
def test_a_kubectl_list_of_stored_runtimes_validates(plane: ControlPlane, namespace: str) -> None:
    install_crds(plane)
    for name in ("secrets.yaml", "runtime.yaml", "runtime-production.yaml"):
        plane.kubectl("apply", "-n", namespace, "-f", str(REPO / "examples" / name))
    listed = plane.kubectl("get", "truntime", "-n", namespace, "-o", "yaml").stdout
    assert "kind: List" in listed

    result = subprocess.run(
        [*VALIDATE, "-f", "-"], input=listed, capture_output=True, text=True, check=False
    )
    assert (result.returncode, result.stderr) == (0, "")
    assert "2 TrussiumRuntime(s) in 1 file(s): 2 valid, 0 invalid" in result.stdout
