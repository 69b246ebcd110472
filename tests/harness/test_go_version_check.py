"""The component builds stop before building anything when the Go on PATH is
older than the pinned components need, naming the Go found and the Go required."""

import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
K8S = REPO / "hack" / "k8s"
OLD_GO = "1.22.3"


def minimum(name: str) -> str:
    for line in (K8S / "go-versions.env").read_text().splitlines():
        key, _, value = line.partition("=")
        if key == name:
            return value
    raise AssertionError(f"{name} missing from go-versions.env")


@pytest.mark.parametrize(
    ("script", "variable", "what"),
    [
        ("build.sh", "GO_MIN_COMPONENTS", "the Kubernetes components"),
        ("build-node.sh", "GO_MIN_NODE", "the node components"),
        ("build-certmanager.sh", "GO_MIN_CERT_MANAGER", "cert-manager"),
    ],
)
def test_an_old_go_fails_at_once_naming_both_versions(
    tmp_path: Path, script: str, variable: str, what: str
) -> None:
    fake = tmp_path / "bin"
    fake.mkdir()
    calls = tmp_path / "go-calls"
    go = fake / "go"
    go.write_text(
        f'#!/bin/sh\necho "$*" >> {calls}\n'
        f'[ "$1" = version ] && echo "go version go{OLD_GO} linux/amd64"\n'
    )
    go.chmod(0o755)
    env = {
        k: v
        for k, v in os.environ.items()
        if k
        not in ("TRUSSIUM_K8S_BIN_DIR", "TRUSSIUM_NODE_BIN_DIR", "TRUSSIUM_CERT_MANAGER_BIN_DIR")
    }
    # An empty cache: nothing is built yet, so the script reaches its build.
    env |= {"PATH": f"{fake}{os.pathsep}{env['PATH']}", "TRUSSIUM_K8S_CACHE": str(tmp_path)}
    result = subprocess.run(
        ["bash", str(K8S / script)], env=env, capture_output=True, text=True, timeout=30
    )
    need = minimum(variable)
    assert result.returncode != 0
    assert f"Go {OLD_GO} ({go}) is too old to build {what}" in result.stderr
    assert f"require Go {need} or newer" in result.stderr
    assert "https://go.dev/dl/" in result.stderr
    assert calls.read_text().splitlines() == ["version"], "go ran for more than its version"
