"""Where the pinned Kubernetes binaries are, and which versions they are.

hack/k8s/versions.env pins the newest supported minor and versions-1.NN.env
each older one (TRUSSIUM_K8S_VERSION=1.NN selects it, as in hack/k8s/pins.sh);
hack/k8s/build.sh is the one place that builds or finds them, so this module
only asks those.
"""

import functools
import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
BUILD_SCRIPT = REPO_ROOT / "hack" / "k8s" / "build.sh"
VERSIONS_FILE = REPO_ROOT / "hack" / "k8s" / "versions.env"
# Set to 1.NN (`make test-k8s K8S_VERSION=1.NN`) to build and run another supported minor.
VERSION_VARIABLE = "TRUSSIUM_K8S_VERSION"
# What the api profile runs or its tests call; the other profiles need every binary.
API_BINARIES = ("etcd", "kube-apiserver", "kubectl", "helm")
BINARIES = (*API_BINARIES, "kube-controller-manager", "kube-scheduler", "kwok")
KWOK_STAGES = "kwok-stages.yaml"  # kwok's default Stage objects, written by build.sh
NODE_BUILD_SCRIPT = REPO_ROOT / "hack" / "k8s" / "build-node.sh"
NODE_BINARIES = (
    "kubelet",
    "kube-proxy",
    "containerd",
    "containerd-shim-runc-v2",
    "ctr",
    "runc",
    "bridge",
    "host-local",
    "loopback",
    "portmap",
)


class ComponentsError(RuntimeError):
    """The binaries could not be built or found, or the pins are unreadable."""


def parse_versions(text: str) -> dict[str, str]:
    """The `KEY=value` assignments of versions.env (comments and blank lines skipped)."""
    versions: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.isidentifier() or not value:
            raise ComponentsError(f"versions.env line {number}: expected KEY=value, got {raw!r}")
        versions[key] = value
    return versions


def minor_of(version: str) -> int:
    """19 for v1.19.3 (or 1.19)."""
    parts = version.removeprefix("v").split(".")
    if len(parts) < 2 or parts[0] != "1" or not parts[1].isdigit():
        raise ComponentsError(f"not a Kubernetes 1.x version: {version!r}")
    return int(parts[1])


def _minor_file(minor: int) -> Path:
    return VERSIONS_FILE.with_name(f"versions-1.{minor}.env")


def pinned_minors() -> list[int]:
    """Every minor with pins, oldest first: the newest (versions.env) and each versions-1.NN.env."""
    older = (
        minor_of(p.stem.removeprefix("versions-"))
        for p in VERSIONS_FILE.parent.glob("versions-*.env")
    )
    newest = minor_of(parse_versions(VERSIONS_FILE.read_text())["KUBERNETES_VERSION"])
    return sorted({newest, *older})


@dataclass(frozen=True)
class Components:
    bin_dir: Path
    versions: Mapping[str, str]

    def path(self, name: str) -> Path:
        return self.bin_dir / name

    @property
    def minor(self) -> int:
        """The Kubernetes minor these binaries are, for flags that differ between minors."""
        return minor_of(self.versions["KUBERNETES_VERSION"])


def pinned_versions() -> dict[str, str]:
    """versions.env, overlaid with versions-1.NN.env when $TRUSSIUM_K8S_VERSION selects 1.NN."""
    pins = parse_versions(VERSIONS_FILE.read_text())
    selected = os.environ.get(VERSION_VARIABLE, "")
    if not selected or minor_of(selected) == minor_of(pins["KUBERNETES_VERSION"]):
        return pins
    override = _minor_file(minor_of(selected))
    if not override.is_file():
        listed = ", ".join(f"1.{m}" for m in pinned_minors())
        raise ComponentsError(f"{VERSION_VARIABLE}={selected}: no pins (pinned: {listed})")
    return pins | parse_versions(override.read_text())


def _build(script: Path, expected: tuple[str, ...], *args: str) -> Path:
    """Run a build script (it prints the bin directory last) and check its output."""
    # Build progress goes to stderr untouched: a first build takes a long while.
    result = subprocess.run(["bash", str(script), *args], stdout=subprocess.PIPE, text=True)
    lines = result.stdout.strip().splitlines()
    if result.returncode != 0 or not lines:
        raise ComponentsError(f"{script} failed (exit {result.returncode}); see its stderr")
    bin_dir = Path(lines[-1])
    missing = [name for name in expected if not (bin_dir / name).is_file()]
    if missing:
        raise ComponentsError(f"{bin_dir} lacks {', '.join(missing)}")
    return bin_dir


@functools.cache
def locate(binaries: tuple[str, ...] = BINARIES) -> Components:
    """Build (first time only, slow) or reuse `binaries`; honours TRUSSIUM_K8S_BIN_DIR."""
    expected = (*binaries, KWOK_STAGES) if "kwok" in binaries else binaries
    bin_dir = _build(BUILD_SCRIPT, expected, *binaries)
    return Components(bin_dir=bin_dir, versions=pinned_versions())


@functools.cache
def locate_node() -> Path:
    """The node profile's binaries (build-node.sh; honours TRUSSIUM_NODE_BIN_DIR)."""
    return _build(NODE_BUILD_SCRIPT, NODE_BINARIES)
