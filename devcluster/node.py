"""One real node for the `node` profile: containerd, runc, CNI, kubelet and
kube-proxy, in network and mount namespaces of their own.

Why namespaces: kubelet, kube-proxy and the CNI plugins own host-wide state
(iptables chains, a bridge, mounts, /run paths, kernel tunables). Inside a
namespace pair created here, all of it is private to this node and vanishes
with it, and two node planes on one host never meet. A "holder" process keeps
the namespaces alive; every node component enters them with nsenter.

Teardown (`Node.teardown`, after the control plane stopped the components):
kill every process left in the node's cgroup tree (containers, pause) and
in its mount namespace (runc shims, which detach from their parent), then
the holder; remove the cgroups and the host end of the veth pair. The
namespaces, with the bridge, the iptables rules and the mounts in them, go
with their last process.
"""

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from devcluster import flags, nodeconfig
from devcluster.components import REPO_ROOT
from devcluster.nodeconfig import Addresses, CgroupMode
from devcluster.pki import Identity
from devcluster.process import Process

IDENTITIES = {
    "kubelet": Identity(f"system:node:{nodeconfig.NODE_NAME}", ("system:nodes",)),
    "kube-proxy": Identity("system:kube-proxy"),
    "apiserver-kubelet-client": Identity("kube-apiserver-kubelet-client"),
}
REQUIRED_TOOLS = ("iptables", "ip", "unshare", "nsenter", "mount")
COMMAND_TIMEOUT = 60.0
IMAGE_BUILD_TIMEOUT = 3600.0
IMAGE_IMPORT_TIMEOUT = 600.0  # the operator image unpacks 190 MB
SWEEP_ROUNDS = 50
POLL_SECONDS = 0.1

Spawn = Callable[[str, Sequence[str]], Process]


class NodeError(RuntimeError):
    """The node could not be set up; the message says which step and why."""


def unsupported_reason() -> str | None:
    """Why this host cannot run the node profile (one line), or None if it can."""
    if os.geteuid() != 0:
        return "the node profile needs root (kubelet and runc manage cgroups, mounts, namespaces)"
    for tool in REQUIRED_TOOLS:
        if shutil.which(tool) is None:
            return f"the node profile needs `{tool}` (hack/setup-host.sh installs it)"
    if "overlay" not in Path("/proc/filesystems").read_text():
        return "the kernel has no overlay filesystem (containerd's snapshotter)"
    mounts = nodeconfig.cgroup_mounts(Path("/proc/self/mountinfo").read_text())
    if not mounts:
        return "no cgroup hierarchy is mounted"
    probe = mounts[0] / f"devcluster-probe-{os.getpid()}"
    try:
        probe.mkdir()
        probe.rmdir()
    except OSError as error:
        return f"cgroups are not writable ({mounts[0]}: {error.strerror})"
    return None


def _run(
    argv: Sequence[str], what: str, *, check: bool = True, timeout: float = COMMAND_TIMEOUT
) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        list(argv), capture_output=True, text=True, timeout=timeout, check=False
    )
    if check and result.returncode != 0:
        raise NodeError(f"{what} failed: {' '.join(argv)}: {result.stderr.strip()}")
    return result


def build_image(recipe: str) -> Path:
    """Build (or find cached) one of hack/image's OCI archives; returns its path."""
    result = subprocess.run(
        [sys.executable, "-m", "hack.image", "build", recipe],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        text=True,
        timeout=IMAGE_BUILD_TIMEOUT,
        check=False,
    )
    lines = result.stdout.strip().splitlines()
    if result.returncode != 0 or not lines:
        raise NodeError(f"building the {recipe} image failed (exit {result.returncode})")
    return Path(lines[-1])


def _ns_inode(pid: int, kind: str) -> int | None:
    try:
        return os.stat(f"/proc/{pid}/ns/{kind}").st_ino
    except OSError:
        return None


def _cgroup_procs(directory: Path) -> set[int]:
    pids: set[int] = set()
    for procs in directory.rglob("cgroup.procs"):
        with contextlib.suppress(OSError, ValueError):
            pids.update(int(line) for line in procs.read_text().split())
    return pids


def _mount_ns_members(inode: int, exclude: int) -> set[int]:
    members = set()
    for entry in Path("/proc").iterdir():
        pid = int(entry.name) if entry.name.isdigit() else exclude
        if pid != exclude and _ns_inode(pid, "mnt") == inode:
            members.add(pid)
    return members


def _remove_cgroup_tree(directory: Path) -> None:
    """rmdir bottom-up (cgroup directories hold only kernel files, which rmdir takes along)."""
    if not directory.is_dir():
        return
    for current, _, _ in sorted(os.walk(directory), key=lambda w: -len(w[0])):
        with contextlib.suppress(OSError):
            os.rmdir(current)


class Node:
    """Create with the plane's directory and the node binaries; `prepare()` before
    the API server starts (it must listen on the veth), `start()` after."""

    def __init__(self, root: Path, bin_dir: Path, log_dir: Path) -> None:
        self.root = root
        self.bin_dir = bin_dir
        self._log_dir = log_dir
        mountinfo = Path("/proc/self/mountinfo").read_text()
        self.mode = nodeconfig.cgroup_mode(mountinfo)
        self._cgroup_mounts = nodeconfig.cgroup_mounts(mountinfo)
        self._holder: Process | None = None
        self._mount_ns: int | None = None
        self._addresses: Addresses | None = None
        self._cgroups: list[Path] = []

    # --- what the control plane and tests use ---------------------------------

    @property
    def addresses(self) -> Addresses:
        if self._addresses is None:
            raise RuntimeError("node not prepared")
        return self._addresses

    @property
    def containerd_socket(self) -> Path:
        return self.root / "containerd" / "containerd.sock"

    def enter(self, *argv: str) -> list[str]:
        """`argv` run inside the node's mount and network namespaces."""
        if self._holder is None:
            raise RuntimeError("node not prepared")
        return ["nsenter", f"--target={self._holder.pid}", "--mount", "--net", "--", *argv]

    def ctr(self, *args: str) -> list[str]:
        """A ctr command line against this node's containerd, in the CRI namespace."""
        ctr = str(self.bin_dir / "ctr")
        return self.enter(ctr, f"--address={self.containerd_socket}", "--namespace=k8s.io", *args)

    def import_image(self, archive: Path) -> None:
        """Import an OCI or Docker image archive into containerd, where pods find it
        (nothing is ever pulled: the node has no route out)."""
        argv = self.ctr("images", "import", str(archive))
        _run(argv, "image import", timeout=IMAGE_IMPORT_TIMEOUT)

    def images(self) -> list[str]:
        return _run(self.ctr("images", "list", "--quiet"), "image list").stdout.split()

    # --- lifecycle -----------------------------------------------------------

    def prepare(self) -> Addresses:
        """Namespaces, veth pair and cgroup root; returns the addresses claimed."""
        self._holder = Process(
            "node-namespaces",
            ["unshare", "--mount", "--net", "--propagation", "private", "sleep", "infinity"],
            self._log_dir / "node-namespaces.log",
            dict(os.environ),
        )
        self._holder.start()
        self._wait_for_namespaces(self._holder)
        self._setup_namespaces()
        self._addresses = self._claim_slot()
        self._create_cgroups(self._addresses.cgroup_root)
        return self._addresses

    def start(self, spawn: Spawn, kubeconfigs: dict[str, Path], ca: Path) -> None:
        """Start containerd (with the sandbox image imported), kubelet and kube-proxy."""
        addresses = self.addresses
        files = self._write_configs(addresses, ca, kubeconfigs["kube-proxy"])
        env_path = f"PATH={self.bin_dir}:{os.environ.get('PATH', '')}"
        spawn(
            "containerd",
            self.enter(
                "env", env_path, str(self.bin_dir / "containerd"), f"--config={files['containerd']}"
            ),
        )
        self._wait_for_containerd()
        self._import_sandbox_image()
        kubelet_dir = self.root / "kubelet"
        spawn(
            "kubelet",
            self.enter(
                "env", env_path, str(self.bin_dir / "kubelet"),
                f"--config={files['kubelet']}",
                f"--kubeconfig={kubeconfigs['kubelet']}",
                f"--root-dir={kubelet_dir}",
                f"--cert-dir={kubelet_dir / 'pki'}",
                f"--hostname-override={nodeconfig.NODE_NAME}",
                f"--node-ip={addresses.node_ip}",
            ),
        )  # fmt: skip
        spawn(
            "kube-proxy",
            self.enter(
                "env", env_path, str(self.bin_dir / "kube-proxy"), f"--config={files['kube-proxy']}"
            ),
        )

    def teardown(self) -> None:
        """Kill what is left of the node and remove what it created on the host."""
        if self._holder is None:
            return
        holder_pid = self._holder.pid
        for _ in range(SWEEP_ROUNDS):
            left: set[int] = set()
            for cgroup in self._cgroups:
                left |= _cgroup_procs(cgroup)
            if self._mount_ns is not None:
                left |= _mount_ns_members(self._mount_ns, exclude=holder_pid)
            left.discard(os.getpid())
            if not left:
                break
            for pid in left:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(POLL_SECONDS)
        self._holder.terminate()
        self._holder.kill(1.0)
        for cgroup in self._cgroups:
            _remove_cgroup_tree(cgroup)
        if self._addresses is not None:
            _run(["ip", "link", "delete", self._addresses.host_link], "veth removal", check=False)
        self._holder = None

    # --- internals -----------------------------------------------------------

    def _wait_for_namespaces(self, holder: Process) -> None:
        """unshare has entered its namespaces once its net namespace differs from ours."""
        ours = _ns_inode(os.getpid(), "net")
        deadline = time.monotonic() + COMMAND_TIMEOUT
        while time.monotonic() < deadline:
            if holder.exit_code() is not None:
                raise NodeError(holder.describe_exit(10))
            net = _ns_inode(holder.pid, "net")
            if net is not None and net != ours:
                self._mount_ns = _ns_inode(holder.pid, "mnt")
                return
            time.sleep(POLL_SECONDS)
        raise NodeError("unshare did not create the node's namespaces in time")

    def _setup_namespaces(self) -> None:
        """Private /run and /var/lib (CNI caches, netns and lock files land there),
        kubelet's kernel tunables shown without touching the host's, loopback up,
        forwarding and bridge netfilter on for kube-proxy's Service rules."""
        tunables = self.root / "sysctl"
        tunables.mkdir(parents=True)
        script = ["set -e", "mount -t tmpfs -o mode=0755 devcluster-run /run"]
        script.append("mount -t tmpfs -o mode=0755 devcluster-var-lib /var/lib")
        for name, value in nodeconfig.KUBELET_KERNEL_TUNABLES.items():
            path = tunables / name.replace("/", ".")
            path.write_text(value + "\n")
            script.append(f"mount --bind {path} /proc/sys/{name}")
        script += [
            "ip link set lo up",
            "echo 1 > /proc/sys/net/ipv4/ip_forward",
            "if [ -e /proc/sys/net/bridge/bridge-nf-call-iptables ]; then"
            " echo 1 > /proc/sys/net/bridge/bridge-nf-call-iptables; fi",
        ]
        _run(self.enter("sh", "-c", "\n".join(script)), "node namespace setup")

    def _claim_slot(self) -> Addresses:
        """The first slot whose host link name is free: creating the link claims it."""
        assert self._holder is not None
        for slot in range(nodeconfig.SLOTS):
            addresses = Addresses(slot)
            created = _run(
                ["ip", "link", "add", addresses.host_link, "type", "veth",
                 "peer", "name", "eth0", "netns", str(self._holder.pid)],
                "veth creation",
                check=False,
            )  # fmt: skip
            if created.returncode == 0:
                break
            if "File exists" not in created.stderr:
                raise NodeError(f"creating the node's veth pair failed: {created.stderr.strip()}")
        else:
            raise NodeError(f"all {nodeconfig.SLOTS} node slots are taken")
        self._addresses = addresses
        prefix = addresses.transit_prefix
        link = addresses.host_link
        _run(["ip", "addr", "add", f"{addresses.host_ip}/{prefix}", "dev", link], "host address")
        _run(["ip", "link", "set", link, "up"], "host link")
        node_end = f"ip addr add {addresses.node_ip}/{prefix} dev eth0 && ip link set eth0 up"
        _run(self.enter("sh", "-c", node_end), "node network setup")
        route = ["ip", "route", "add", addresses.pod_cidr, "via", addresses.node_ip]
        _run(route, "pod network route")
        # No default route in the node: kube-proxy's DNAT needs a route to Service IPs
        # for the node's own (host-network) clients, so give them one, towards the host.
        service_route = f"ip route add {flags.SERVICE_CIDR} dev eth0"
        _run(self.enter("sh", "-c", service_route), "service network route")
        return addresses

    def _create_cgroups(self, cgroup_root: str) -> None:
        relative = cgroup_root.lstrip("/")
        for mount in self._cgroup_mounts:
            directory = mount / relative
            directory.mkdir(exist_ok=True)
            self._cgroups.append(directory)
            if (mount / "cpuset.cpus").exists():
                # A new v1 cpuset starts empty, and nothing can join it until filled.
                for name in ("cpuset.cpus", "cpuset.mems"):
                    (directory / name).write_text((mount / name).read_text())
            if self.mode is CgroupMode.V2 and mount == Path("/sys/fs/cgroup"):
                wanted = (mount / "cgroup.subtree_control").read_text().split()
                with contextlib.suppress(OSError):
                    (directory / "cgroup.subtree_control").write_text(
                        " ".join(f"+{c}" for c in wanted)
                    )

    def _write_configs(
        self, addresses: Addresses, ca: Path, proxy_kubeconfig: Path
    ) -> dict[str, Path]:
        containerd_dir = self.root / "containerd"
        cni_conf = self.root / "cni" / "net.d"
        hosts = containerd_dir / "certs.d" / "_default"
        for directory in (cni_conf, hosts, self.root / "cni" / "ipam"):
            directory.mkdir(parents=True, exist_ok=True)
        (cni_conf / "10-devcluster.conflist").write_text(
            nodeconfig.cni_config(addresses, self.root / "cni" / "ipam")
        )
        (hosts / "hosts.toml").write_text(nodeconfig.registry_hosts())
        resolv = self.root / "resolv.conf"
        # Pods resolve against their own loopback: no DNS query ever leaves the node.
        resolv.write_text("nameserver 127.0.0.1\n")
        files = {
            "containerd": containerd_dir / "config.toml",
            "kubelet": self.root / "kubelet-config.yaml",
            "kube-proxy": self.root / "kube-proxy-config.yaml",
        }
        files["containerd"].write_text(
            nodeconfig.containerd_config(
                root=containerd_dir / "root",
                state=containerd_dir / "state",
                socket=self.containerd_socket,
                bin_dir=self.bin_dir,
                cni_conf_dir=cni_conf,
                hosts_dir=containerd_dir / "certs.d",
            )
        )
        files["kubelet"].write_text(
            nodeconfig.kubelet_config(
                addresses=addresses,
                mode=self.mode,
                socket=self.containerd_socket,
                client_ca=ca,
                resolv_conf=resolv,
            )
        )
        files["kube-proxy"].write_text(
            nodeconfig.kube_proxy_config(addresses=addresses, kubeconfig=proxy_kubeconfig)
        )
        return files

    def _wait_for_containerd(self) -> None:
        deadline = time.monotonic() + COMMAND_TIMEOUT
        while time.monotonic() < deadline:
            if _run(self.ctr("version"), "containerd version", check=False).returncode == 0:
                return
            time.sleep(POLL_SECONDS * 2)
        raise NodeError("containerd did not answer on its socket in time")

    def _import_sandbox_image(self) -> None:
        """The pause image from hack/image (cached by its inputs), the only image
        the node needs before any pod: containerd is configured with its name."""
        self.import_image(build_image("pause"))
