"""The cluster tier on a cluster the user gives (`TRUSSIUM_CLUSTER=kubeconfig`).

No kind or k3d here: this session's own plane poses as the given cluster.
pytest runs in a subprocess that knows only its kubeconfig, so the test it
runs goes through the KUBECONFIG route (devcluster.external), not through
the plane's ownership; the plane's audit log shows where its requests went.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from devcluster import ControlPlane, StartupError, kubeconfig
from devcluster.external import ExternalCluster

pytestmark = [
    pytest.mark.cluster,
    pytest.mark.own_plane("a plane of its own, to pose as the given cluster"),
]
REPO = Path(__file__).resolve().parents[2]
CHART_TEST = "test_each_certificate_mode_renders_and_the_api_server_accepts_it"
RUN_SECONDS = 300


def given_cluster_env(config: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    return env | {"TRUSSIUM_CLUSTER": "kubeconfig", "KUBECONFIG": str(config)}


def created_namespaces(plane: ControlPlane) -> list[str]:
    entries = (json.loads(line) for line in plane.audit_log.read_text().splitlines())
    return [
        e["objectRef"].get("name", "")
        for e in entries
        if e["verb"] == "create" and e.get("objectRef", {}).get("resource") == "namespaces"
    ]


def test_the_cluster_tier_runs_on_the_cluster_of_kubeconfig(
    plane: ControlPlane, tmp_path: Path
) -> None:
    given = tmp_path / "given.kubeconfig"
    given.write_bytes(plane.kubeconfig.read_bytes())
    result = subprocess.run(
        [
            sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rs", "-m", "cluster",
            f"tests/cluster/test_chart.py::{CHART_TEST}[selfManaged]",
            "tests/cluster/test_demo.py",
        ],
        cwd=REPO, env=given_cluster_env(given), capture_output=True, text=True,
        timeout=RUN_SECONDS, check=False,
    )  # fmt: skip
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    assert "1 passed, 1 skipped" in output, output[-4000:]
    assert (
        "needs the demo's own local control plane (it checks that nothing of it is left); "
        f"TRUSSIUM_CLUSTER=kubeconfig gives {given}"
    ) in output.replace("\n", ""), output[-4000:]
    stem = CHART_TEST.replace("_", "-")[:30]
    assert any(name.startswith(stem) for name in created_namespaces(plane)), (
        "the chart test's namespace was not created on the given cluster"
    )


def test_a_cluster_that_does_not_answer_fails_fast_and_names_it(tmp_path: Path) -> None:
    ca = tmp_path / "ca.crt"
    ca.write_text("not a certificate\n")
    closed = "https://127.0.0.1:9"  # discard: nothing listens on loopback
    config = kubeconfig.build(closed, ca, kubeconfig.token_user("t"))
    config["clusters"][0]["cluster"] = {"server": closed, "insecure-skip-tls-verify": True}
    path = kubeconfig.write(tmp_path / "closed.kubeconfig", config)
    expected = f"the cluster of {path} \\({closed}\\) did not answer"
    with pytest.raises(StartupError, match=expected), ExternalCluster(path, timeout=2.0):
        pass
