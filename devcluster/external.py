"""A cluster someone else runs (kind, k3d, a shared test cluster), given by a
kubeconfig, in place of the local control plane.

It is chosen only by `TRUSSIUM_CLUSTER=kubeconfig`, never by `KUBECONFIG`
alone: a kubeconfig left in a developer's shell must not point the tests or
the demo at a production cluster. It offers what the chart tests and the demo
ask of a `ControlPlane` (the pinned kubectl and helm, namespaces, the server
and its CA); it starts and stops nothing, and what only our own plane has
(component processes, logs, the audit log, etcd) is refused with the reason.
"""

import base64
import json
import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Self

from devcluster import components as components_module
from devcluster import polling
from devcluster.controlplane import ControlPlane, Profile, StartupError
from devcluster.layout import Layout

CHOICE_VARIABLE = "TRUSSIUM_CLUSTER"
KUBECONFIG_CHOICE = "kubeconfig"
LOCAL_CHOICE = "local"
CLIENT_BINARIES = ("kubectl", "helm")
REACH_TIMEOUT_SECONDS = 30.0
REQUEST_TIMEOUT_SECONDS = 5


class ClusterChoiceError(ValueError):
    """TRUSSIUM_CLUSTER or KUBECONFIG does not name one cluster."""


def chosen_kubeconfig(environ: Mapping[str, str] = os.environ) -> Path | None:
    """The kubeconfig of the cluster the user opted into, or None for the local plane."""
    choice = environ.get(CHOICE_VARIABLE, "")
    if choice in ("", LOCAL_CHOICE):
        return None
    if choice != KUBECONFIG_CHOICE:
        raise ClusterChoiceError(
            f"{CHOICE_VARIABLE}={choice!r}: expected {KUBECONFIG_CHOICE!r} (the cluster of "
            f"$KUBECONFIG) or {LOCAL_CHOICE!r} (the local control plane, the default)"
        )
    kubeconfig = environ.get("KUBECONFIG", "")
    if not kubeconfig or os.pathsep in kubeconfig:
        raise ClusterChoiceError(
            f"{CHOICE_VARIABLE}={KUBECONFIG_CHOICE} needs KUBECONFIG set to one kubeconfig "
            f"file (got {kubeconfig!r}); its current context is the cluster used"
        )
    path = Path(kubeconfig).expanduser()
    if not path.is_file():
        raise ClusterChoiceError(f"KUBECONFIG={kubeconfig}: no such file")
    return path


class NotOurPlaneError(RuntimeError):
    """Asked for a part of the local control plane that a given cluster does not expose."""


class ExternalCluster(ControlPlane):
    """`with ExternalCluster(path) as cluster:` checks the cluster answers; nothing to stop."""

    def __init__(self, kubeconfig: Path, *, timeout: float = REACH_TIMEOUT_SECONDS) -> None:
        super().__init__(Profile.CLUSTER, timeout=timeout)
        self._given_kubeconfig = kubeconfig
        self._server = ""
        self._ca_file: Path | None = None
        self._last_error = ""

    @property
    def kubeconfig(self) -> Path:
        return self._given_kubeconfig

    @property
    def server(self) -> str:
        if not self._server:
            raise RuntimeError("cluster not reached yet")
        return self._server

    @property
    def ca_file(self) -> Path:
        if self._ca_file is None:
            raise NotOurPlaneError(f"{self.kubeconfig}: its cluster names no CA to write down")
        return self._ca_file

    @property
    def log_dir(self) -> Path:
        raise NotOurPlaneError("a cluster given by KUBECONFIG has no component logs of ours")

    @property
    def audit_log(self) -> Path:
        raise NotOurPlaneError("a cluster given by KUBECONFIG has no audit log of ours")

    def tail_logs(self, lines: int = 40) -> str:
        return f"(a cluster given by KUBECONFIG, {self.kubeconfig}: no component logs here)"

    def compact_etcd(self) -> int:
        raise NotOurPlaneError("a cluster given by KUBECONFIG has no etcd of ours")

    def create_namespace(self, name: str) -> None:
        """Create it and wait for its `default` ServiceAccount, as the local plane does."""
        self.kubectl("create", "namespace", name)
        polling.wait_for(
            lambda: self._has("serviceaccount", "default", "-n", name),
            f"the default ServiceAccount of namespace {name}",
            self._timeout,
        )

    def delete_namespace(self, name: str) -> None:
        self.kubectl("delete", "namespace", name, "--wait=false", "--ignore-not-found")

    def wait_ready(self) -> None:
        polling.wait_for(self._ready, f"{self.server} /readyz", self._timeout)

    def start(self) -> Self:
        if self._layout is not None:
            raise RuntimeError("cluster already reached")
        self._components = components_module.locate(CLIENT_BINARIES)
        # kubectl's and helm's caches, and the token kubeconfigs tests write.
        self._layout = Layout(Path(tempfile.mkdtemp(prefix="devcluster-external-")))
        self._layout.tool_home.mkdir()
        try:
            self._read_kubeconfig()
            polling.wait_for(self._ready, "/readyz", self._timeout, interval=1.0)
        except polling.WaitTimeoutError as error:
            self.stop()
            raise StartupError(
                f"the cluster of {self.kubeconfig} ({self._server}) did not answer /readyz "
                f"within {self._timeout:.0f}s: {self._last_error}"
            ) from error
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Nothing of the cluster's is touched: only the local scratch directory goes."""
        if self._layout is None or self._stopped:
            return
        self._stopped = True
        shutil.rmtree(self._layout.root, ignore_errors=True)

    # --- internals ----------------------------------------------------------

    def _read_kubeconfig(self) -> None:
        view = self.kubectl("config", "view", "--raw", "--minify", "-o", "json")
        cluster = json.loads(view.stdout)["clusters"][0]["cluster"]
        self._server = cluster["server"]
        if "certificate-authority-data" in cluster:
            ca = self._started_layout().root / "ca.crt"
            ca.write_bytes(base64.b64decode(cluster["certificate-authority-data"]))
            self._ca_file = ca
        elif "certificate-authority" in cluster:
            self._ca_file = Path(cluster["certificate-authority"])

    def _ready(self) -> bool:
        answer = self.kubectl(
            "get", "--raw", "/readyz", f"--request-timeout={REQUEST_TIMEOUT_SECONDS}s",
            check=False, timeout=REQUEST_TIMEOUT_SECONDS + 5,
        )  # fmt: skip
        self._last_error = answer.stderr.strip()[-500:]
        return answer.returncode == 0

    def _has(self, *what: str) -> bool:
        return self.kubectl("get", *what, "-o", "name", check=False).returncode == 0
