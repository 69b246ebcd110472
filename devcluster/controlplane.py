"""A real Kubernetes control plane on loopback, for tests and the demo.

Profile `api` is etcd + kube-apiserver (what envtest gives, RBAC on);
profile `cluster` adds kube-controller-manager, kube-scheduler and kwok with
fake Nodes, so Deployments roll out and garbage collection works;
profile `node` adds one real node (containerd, runc, CNI, kubelet and
kube-proxy: devcluster/node.py), so containers really run.
"""

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Callable, Sequence
from enum import StrEnum
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from devcluster import components as components_module
from devcluster import flags, nodeconfig, teardown
from devcluster import kubeconfig as kubeconfigs
from devcluster import node as node_module
from devcluster.components import Components
from devcluster.layout import HOST, Layout, Ports
from devcluster.node import Node
from devcluster.pki import Identity, Pki, write_pki
from devcluster.process import Process, tail
from devcluster.rest import Rest

IDENTITIES = {
    "admin": Identity("kubernetes-admin", ("system:masters",)),
    "controller-manager": Identity("system:kube-controller-manager"),
    "scheduler": Identity("system:kube-scheduler"),
    "kwok": Identity("kwok-controller", ("system:masters",)),
}
NODE_ZONES = ("devcluster-a", "devcluster-b", "devcluster-c")
STOP_GRACE_SECONDS = 5.0
POLL_SECONDS = 0.1


class Profile(StrEnum):
    API = "api"
    CLUSTER = "cluster"
    NODE = "node"


class StartupError(RuntimeError):
    """The control plane did not become ready; the message carries the log tails."""


class CommandError(subprocess.CalledProcessError):
    """A kubectl/helm call failed; unlike its base class, it shows stderr."""

    def __str__(self) -> str:
        return f"{super().__str__()}\nstderr:\n{self.stderr}"


def fake_node(name: str, zone: str) -> dict[str, Any]:
    """A Node that kwok manages: roomy, untainted, labelled like a real one."""
    resources = {"cpu": "32", "memory": "256Gi", "pods": "110", "ephemeral-storage": "1Ti"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {flags.FAKE_NODE_ANNOTATION: flags.FAKE_NODE_VALUE},
            "labels": {
                "type": "kwok",
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "topology.kubernetes.io/region": "devcluster",
                "topology.kubernetes.io/zone": zone,
            },
        },
        "status": {"allocatable": resources, "capacity": resources},
    }


def node_ready(node: dict[str, Any]) -> bool:
    """Ready, and no taint left that would keep pods off it."""
    conditions = node.get("status", {}).get("conditions", [])
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
    taints = node.get("spec", {}).get("taints", [])
    return ready and not any(t.get("effect") in ("NoSchedule", "NoExecute") for t in taints)


def _post_json(url: str, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        result: dict[str, Any] = json.loads(answer.read())
        return result


class ControlPlane:
    """Start with `start()` or `with ControlPlane(...) as plane:`; `stop()` is idempotent."""

    def __init__(
        self,
        profile: Profile | str = Profile.API,
        *,
        components: Components | None = None,
        nodes: int | None = None,
        timeout: float = 180.0,
        keep_dir: bool = False,
        apiserver_args: Sequence[str] = (),
    ) -> None:
        try:
            self.profile = Profile(profile)
        except ValueError:
            choices = ", ".join(p.value for p in Profile)
            raise ValueError(f"unknown profile {profile!r} (choose from {choices})") from None
        # kwok nodes: 3 by default in the cluster profile, none beside the real node.
        nodes = (0 if self.profile is Profile.NODE else 3) if nodes is None else nodes
        if nodes < (0 if self.profile is Profile.NODE else 1):
            raise ValueError(f"nodes must be at least 1 in the {self.profile} profile")
        self._components = components
        self._nodes = nodes
        self._node: Node | None = None
        self._api_host = HOST
        self._timeout = timeout
        self._keep_dir = keep_dir
        self._apiserver_args = list(apiserver_args)  # extra kube-apiserver flags
        self._layout: Layout | None = None
        self._ports: Ports | None = None
        self._rest: Rest | None = None
        self._pki: Pki | None = None
        self._processes: list[Process] = []
        self._stopped = False

    # --- what callers use -------------------------------------------------

    @property
    def directory(self) -> Path:
        return self._started_layout().root

    @property
    def kubeconfig(self) -> Path:
        return self._started_layout().admin_kubeconfig

    @property
    def log_dir(self) -> Path:
        return self._started_layout().logs

    @property
    def audit_log(self) -> Path:
        """JSON lines, one per request (stage ResponseComplete, or ResponseStarted for watches)."""
        return self._started_layout().audit_log

    @property
    def ca_file(self) -> Path:
        if self._pki is None:
            raise RuntimeError("control plane not started")
        return self._pki.ca.cert

    @property
    def server(self) -> str:
        if self._ports is None:
            raise RuntimeError("control plane not started")
        return f"https://{self._api_host}:{self._ports.apiserver}"

    @property
    def bin_dir(self) -> Path:
        return self._located_components().bin_dir

    @property
    def minor(self) -> int:
        """The Kubernetes minor it runs: versions.env's, or $TRUSSIUM_K8S_VERSION's."""
        return self._located_components().minor

    @property
    def pids(self) -> dict[str, int]:
        """Component name -> pid (also its process group id)."""
        return {p.name: p.pid for p in self._processes}

    def kubectl(
        self,
        *args: str,
        input: str | None = None,
        check: bool = True,
        timeout: float = 120.0,
        kubeconfig: Path | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Run the pinned kubectl, as the admin unless another `kubeconfig` is given."""
        config = kubeconfig or self.kubeconfig
        argv = [str(self.bin_dir / "kubectl"), f"--kubeconfig={config}", *args]
        return self._run(argv, input, check, timeout)

    def helm(
        self, *args: str, input: str | None = None, check: bool = True, timeout: float = 300.0
    ) -> subprocess.CompletedProcess[str]:
        argv = [str(self.bin_dir / "helm"), f"--kubeconfig={self.kubeconfig}", *args]
        return self._run(argv, input, check, timeout)

    def token_kubeconfig(self, token: str, name: str) -> Path:
        """A kubeconfig that authenticates with `token` only (e.g. a ServiceAccount's)."""
        layout = self._started_layout()
        config = kubeconfigs.build(self.server, self.ca_file, kubeconfigs.token_user(token))
        return kubeconfigs.write(layout.kubeconfig(f"token-{name}"), config)

    def create_namespace(self, name: str) -> None:
        """Create it; in the cluster profile also wait for its `default` ServiceAccount,
        without which the ReplicaSet controller cannot create pods yet."""
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        status, answer = self._api().request("POST", "/api/v1/namespaces", body)
        if status != 201:
            raise RuntimeError(f"creating namespace {name} failed ({status}): {answer}")
        if self.profile is not Profile.API:
            self._wait_for(
                f"the default ServiceAccount of namespace {name}",
                lambda: self._exists(f"/api/v1/namespaces/{name}/serviceaccounts/default"),
            )

    def delete_namespace(self, name: str) -> None:
        """Start the deletion and return (without a namespace controller, as in the api
        profile, the namespace stays Terminating, which harms no one)."""
        self._api().request("DELETE", f"/api/v1/namespaces/{name}")

    def tail_logs(self, lines: int = 40) -> str:
        """The last lines of each component's log, one section per component."""
        return "\n".join(
            f"==> {p.log} <==\n{tail(p.log, lines)}\n" for p in self._processes if p.log.exists()
        )

    @property
    def node(self) -> Node:
        """The real node (node profile only): its addresses, containerd, image import."""
        if self._node is None:
            raise RuntimeError(f"the {self.profile} profile has no real node")
        return self._node

    def exited_component(self) -> Process | None:
        """The first component that is no longer running, if any."""
        return next((p for p in self._processes if p.exit_code() is not None), None)

    # --- fault injection ------------------------------------------------------
    # One component at a time, on a running plane; the data directory stays, so
    # etcd comes back with every object and a restarted API server with its state.

    def kill_component(self, name: str) -> None:
        """SIGKILL the component (its whole process group) and reap it."""
        self._component(name).kill(0.0)

    def stop_component(self, name: str) -> None:
        """SIGTERM, then SIGKILL if it is still there after the grace period."""
        process = self._component(name)
        process.terminate()
        process.kill(STOP_GRACE_SECONDS)

    def freeze_component(self, name: str) -> None:
        """SIGSTOP: the process keeps its sockets open but answers nothing."""
        self._component(name).send(signal.SIGSTOP)

    def resume_component(self, name: str) -> None:
        self._component(name).send(signal.SIGCONT)

    def component_exited(self, name: str) -> bool:
        return self._component(name).exit_code() is not None

    def start_component(self, name: str) -> None:
        """Start a stopped or killed component again (same flags, ports and data) and
        wait until the API server is ready again."""
        if not self.component_exited(name):
            raise RuntimeError(f"{name} is still running")
        self._component(name).start()
        self.wait_ready()

    def restart_component(self, name: str, *, kill: bool = False) -> None:
        """Stop (or SIGKILL) the component, start it again, wait until the plane is ready."""
        if kill:
            self.kill_component(name)
        else:
            self.stop_component(name)
        self.start_component(name)

    def compact_etcd(self) -> int:
        """Compact etcd's history up to its current revision (which is returned): a
        watch from an older resourceVersion that etcd serves gets 410 Gone."""
        if self._ports is None:
            raise RuntimeError("control plane not started")
        base = f"http://{HOST}:{self._ports.etcd_client}/v3/kv"
        # Any key will do: every answer's header carries the store's revision.
        header = _post_json(f"{base}/range", {"key": "AA=="})["header"]
        revision = int(header["revision"])
        _post_json(f"{base}/compaction", {"revision": revision, "physical": True})
        return revision

    def wait_ready(self) -> None:
        """Until kube-apiserver's /readyz answers 200 (etcd reachable, caches synced)."""
        self._wait_for("kube-apiserver /readyz", lambda: self._api().get("/readyz")[0] == 200)

    # --- lifecycle ----------------------------------------------------------

    def start(self) -> Self:
        if self._layout is not None:
            raise RuntimeError("control plane already started")
        components = self._located_components()
        self._layout = Layout(Path(tempfile.mkdtemp(prefix=f"devcluster-{self.profile}-")))
        self._ports = Ports.allocate()
        teardown.register(self)
        try:
            self._boot(components, self._layout, self._ports)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop every component (their whole process groups) and remove the directory."""
        if self._layout is None or self._stopped:
            return
        self._stopped = True
        # Reverse start order, each one gone before the next: an API server whose
        # etcd vanished first hangs in its graceful shutdown until killed.
        for process in reversed(self._processes):
            process.terminate()
            process.kill(STOP_GRACE_SECONDS)
        if self._node is not None:
            self._node.teardown()
        teardown.unregister(self)
        if not self._keep_dir:
            shutil.rmtree(self._layout.root, ignore_errors=True)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    # --- internals ----------------------------------------------------------

    def _component(self, name: str) -> Process:
        for process in self._processes:
            if process.name == name:
                return process
        raise ValueError(f"no component {name!r} in this plane ({', '.join(self.pids)})")

    def _started_layout(self) -> Layout:
        if self._layout is None:
            raise RuntimeError("control plane not started")
        return self._layout

    def _located_components(self) -> Components:
        if self._components is None:
            api_only = self.profile is Profile.API
            self._components = components_module.locate(
                components_module.API_BINARIES if api_only else components_module.BINARIES
            )
        return self._components

    def _api(self) -> Rest:
        if self._rest is None:
            raise RuntimeError("control plane not started")
        return self._rest

    def _boot(self, components: Components, layout: Layout, ports: Ports) -> None:
        bin_dir = components.bin_dir
        layout.logs.mkdir()
        layout.tool_home.mkdir()
        layout.audit_policy.write_text(flags.AUDIT_POLICY)
        identities, extra_ips = IDENTITIES, list[str]()
        if self.profile is Profile.NODE:
            self._node = Node(layout.root / "node", components_module.locate_node(), layout.logs)
            addresses = self._node.prepare()
            self._api_host = addresses.host_ip
            identities, extra_ips = IDENTITIES | node_module.IDENTITIES, [addresses.host_ip]
        pki = self._pki = write_pki(layout.pki, identities, flags.SERVICE_IP, extra_ips)
        for name, pair in pki.clients.items():
            user = kubeconfigs.certificate_user(pair.cert, pair.key)
            kubeconfigs.write(
                layout.kubeconfig(name), kubeconfigs.build(self.server, pki.ca.cert, user)
            )
        self._rest = Rest(self.server, str(pki.ca.cert), pki.clients["admin"])

        self._spawn("etcd", flags.etcd(bin_dir, layout, ports))
        apiserver = flags.apiserver(bin_dir, layout, ports, pki, components.minor)
        apiserver += self._apiserver_args
        if self._node is not None:
            apiserver = nodeconfig.apiserver_flags(
                apiserver, self._node.addresses, pki.clients["apiserver-kubelet-client"]
            )
        self._spawn("kube-apiserver", apiserver)
        self._wait_for("kube-apiserver /readyz", lambda: self._api().get("/readyz")[0] == 200)
        if self.profile is Profile.API:
            return

        self._spawn(
            "kube-controller-manager", flags.controller_manager(bin_dir, layout, ports, pki)
        )
        self._spawn("kube-scheduler", flags.scheduler(bin_dir, layout, ports))
        self._spawn("kwok", flags.kwok(bin_dir, layout, ports))
        names = [f"kwok-node-{i}" for i in range(self._nodes)]
        for i, name in enumerate(names):
            node = fake_node(name, NODE_ZONES[i % len(NODE_ZONES)])
            status, answer = self._api().request("POST", "/api/v1/nodes", node)
            if status != 201:
                raise StartupError(f"creating node {name} failed ({status}): {answer}")
        self._wait_for(
            "the default ServiceAccount",
            lambda: self._exists("/api/v1/namespaces/default/serviceaccounts/default"),
        )
        if names:
            self._wait_for(f"{self._nodes} Ready kwok nodes", lambda: self._nodes_ready(names))
        if self._node is not None:
            kubeconfigs_by_name = {n: layout.kubeconfig(n) for n in node_module.IDENTITIES}
            self._node.start(self._spawn, kubeconfigs_by_name, pki.ca.cert)
            self._wait_for(
                f"node {nodeconfig.NODE_NAME} Ready",
                lambda: self._real_node_ready(nodeconfig.NODE_NAME),
            )

    def _spawn(self, name: str, argv: Sequence[str]) -> Process:
        env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
        process = Process(name, argv, self._started_layout().log(name), env)
        self._processes.append(process)
        process.start()
        return process

    def _exists(self, path: str) -> bool:
        return self._api().get(path)[0] == 200

    def _real_node_ready(self, name: str) -> bool:
        status, answer = self._api().get(f"/api/v1/nodes/{name}")
        return status == 200 and node_ready(answer)

    def _nodes_ready(self, names: list[str]) -> bool:
        status, answer = self._api().get("/api/v1/nodes?labelSelector=type%3Dkwok")
        if status != 200:
            return False
        ready = {n["metadata"]["name"] for n in answer.get("items", []) if node_ready(n)}
        return ready >= set(names)

    def _wait_for(self, what: str, check: Callable[[], bool]) -> None:
        """Poll `check` until true; fail fast if a component exits, or at the deadline."""
        deadline = time.monotonic() + self._timeout
        while True:
            exited = self.exited_component()
            if exited is not None:
                raise StartupError(f"waiting for {what}: {exited.describe_exit(40)}")
            if check():
                return
            if time.monotonic() > deadline:
                raise StartupError(
                    f"timed out after {self._timeout:.0f}s waiting for {what}\n{self.tail_logs(20)}"
                )
            time.sleep(POLL_SECONDS)

    def _tool_env(self) -> dict[str, str]:
        home = self._started_layout().tool_home
        env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
        env.update(
            PATH=f"{self.bin_dir}{os.pathsep}{env.get('PATH', '')}",
            KUBECACHEDIR=str(home / "kube-cache"),
            HELM_CACHE_HOME=str(home / "helm-cache"),
            HELM_CONFIG_HOME=str(home / "helm-config"),
            HELM_DATA_HOME=str(home / "helm-data"),
        )
        return env

    def _run(
        self, argv: list[str], input: str | None, check: bool, timeout: float
    ) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            argv, input=input, capture_output=True, text=True, env=self._tool_env(), timeout=timeout
        )
        if check and result.returncode != 0:
            raise CommandError(result.returncode, argv, result.stdout, result.stderr)
        return result
