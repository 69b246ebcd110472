"""cert-manager on a local control plane: its CRDs, its controller and its
cainjector as host processes, built at the version hack/k8s/certmanager.env
pins (hack/k8s/build-certmanager.sh builds or finds them)."""

import functools
import os
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Self

from devcluster.components import REPO_ROOT, ComponentsError
from devcluster.controlplane import ControlPlane
from devcluster.process import Process

BUILD_SCRIPT = REPO_ROOT / "hack" / "k8s" / "build-certmanager.sh"
BINARY = "cert-manager"
CRDS = "cert-manager-crds.yaml"
CRD_NAMES = (
    "certificates.cert-manager.io",
    "certificaterequests.cert-manager.io",
    "issuers.cert-manager.io",
    "clusterissuers.cert-manager.io",
)
ESTABLISHED_TIMEOUT_SECONDS = 60.0
STOP_GRACE_SECONDS = 10.0


@functools.cache
def bin_dir() -> Path:
    """Build (first time only, slow) or reuse cert-manager (TRUSSIUM_CERT_MANAGER_BIN_DIR)."""
    result = subprocess.run(["bash", str(BUILD_SCRIPT)], stdout=subprocess.PIPE, text=True)
    lines = result.stdout.strip().splitlines()
    if result.returncode != 0 or not lines:
        raise ComponentsError(f"{BUILD_SCRIPT} failed (exit {result.returncode}); see its stderr")
    return Path(lines[-1])


def install_crds(plane: ControlPlane) -> None:
    """Server-side apply cert-manager's CRDs and wait until the API server serves them."""
    plane.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(bin_dir() / CRDS))
    query = '{.status.conditions[?(@.type=="Established")].status}'
    deadline = time.monotonic() + ESTABLISHED_TIMEOUT_SECONDS
    for name in CRD_NAMES:
        while (
            plane.kubectl("get", "crd", name, "-o", f"jsonpath={query}", check=False).stdout.strip()
            != "True"
        ):
            if time.monotonic() > deadline:
                raise RuntimeError(f"CRD {name} not Established in time")
            time.sleep(0.2)


class CertManager:
    """cert-manager components as host processes, with the plane's admin kubeconfig.

    `components` are the binary's subcommands (`controller`, `cainjector`);
    `feature_gates` is passed to each, e.g. `CAInjectorMerging=false` for the
    cainjector of cert-manager releases before 1.19, which replaced caBundle
    instead of merging into it.
    """

    def __init__(
        self,
        plane: ControlPlane,
        components: Sequence[str] = ("controller", "cainjector"),
        *,
        feature_gates: str = "",
    ) -> None:
        self.plane = plane
        self.components = tuple(components)
        self.feature_gates = feature_gates
        self._processes: list[Process] = []

    @property
    def logs(self) -> dict[str, Path]:
        return {p.name: p.log for p in self._processes}

    def start(self) -> Self:
        directory = self.plane.directory / "cert-manager"
        directory.mkdir(exist_ok=True)
        for component in self.components:
            argv = [str(bin_dir() / BINARY), component, "--kubeconfig", str(self.plane.kubeconfig)]
            if self.feature_gates:
                argv += ["--feature-gates", self.feature_gates]
            name = f"cert-manager-{component}"
            process = Process(name, argv, directory / f"{name}.log", dict(os.environ))
            process.start()
            self._processes.append(process)
        return self

    def check_running(self) -> None:
        for process in self._processes:
            if process.exit_code() is not None:
                raise RuntimeError(process.describe_exit(30))

    def stop(self) -> None:
        for process in self._processes:
            process.terminate()
        for process in self._processes:
            process.kill(STOP_GRACE_SECONDS)
        self._processes.clear()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()
