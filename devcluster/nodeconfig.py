"""The node profile's configuration files and addresses: pure functions of
where things are, so they can be read (and tested) without starting anything.

One real node lives in network and mount namespaces of its own; a veth pair
links it to the host, where the control plane runs:

    host  <transit>.1  (kube-apiserver binds here)  ──veth──  <transit>.2  node
    node  bridge <pods>.1/24, one address per pod from host-local IPAM

Slot `n` (0..250) gives transit 10.200.n.0/30 and pods 10.201.n.0/24, so
several node planes on one host never overlap. The node's netns has no
default route: nothing in it can reach past the host.
"""

import ipaddress
import json
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

import yaml

from devcluster.pki import KeyPair

NODE_NAME = "node-0"
SLOTS = 250
KUBELET_PORT = 10250
SANDBOX_IMAGE = "registry.k8s.io/pause:3.10"
CNI_NETWORK = "devcluster"
BRIDGE = "cni0"
# Pulls go to this closed loopback port (inside the node's netns) and fail at once.
CLOSED_REGISTRY = "http://127.0.0.1:1"
# The kernel settings kubelet insists on (it rewrites them host-wide otherwise);
# the node's mount namespace shows it these values, the host keeps its own.
KUBELET_KERNEL_TUNABLES = {
    "vm/overcommit_memory": "1",
    "vm/panic_on_oom": "0",
    "kernel/panic": "10",
    "kernel/panic_on_oops": "1",
    "kernel/keys/root_maxkeys": "1000000",
    "kernel/keys/root_maxbytes": "25000000",
}


class CgroupMode(StrEnum):
    V1 = "v1"  # legacy or hybrid: one hierarchy per controller
    V2 = "v2"  # unified


def cgroup_mode(mountinfo: str) -> CgroupMode:
    """v2 when /sys/fs/cgroup itself is a cgroup2 mount, else v1 (legacy or hybrid)."""
    for line in mountinfo.splitlines():
        fields = line.split(" - ", 1)
        if len(fields) != 2:
            continue
        mount_point = fields[0].split()[4]
        fstype = fields[1].split()[0]
        if mount_point == "/sys/fs/cgroup":
            return CgroupMode.V2 if fstype == "cgroup2" else CgroupMode.V1
    return CgroupMode.V1


def cgroup_mounts(mountinfo: str) -> list[Path]:
    """Every mounted cgroup hierarchy (v1 controllers, name=systemd, unified)."""
    mounts = []
    for line in mountinfo.splitlines():
        fields = line.split(" - ", 1)
        if len(fields) == 2 and fields[1].split()[0] in ("cgroup", "cgroup2"):
            mounts.append(Path(fields[0].split()[4]))
    return mounts


@dataclass(frozen=True)
class Addresses:
    slot: int

    def __post_init__(self) -> None:
        if not 0 <= self.slot < SLOTS:
            raise ValueError(f"node slot {self.slot} out of range 0..{SLOTS - 1}")

    @property
    def host_ip(self) -> str:
        """The host end of the veth pair: the API server listens here."""
        return f"10.200.{self.slot}.1"

    @property
    def node_ip(self) -> str:
        return f"10.200.{self.slot}.2"

    @property
    def transit_prefix(self) -> int:
        return 30

    @property
    def pod_cidr(self) -> str:
        return f"10.201.{self.slot}.0/24"

    @property
    def gateway(self) -> str:
        """The bridge's address: the pods' default gateway."""
        return str(next(ipaddress.ip_network(self.pod_cidr).hosts()))

    @property
    def host_link(self) -> str:
        """The host end's interface name; creating it claims the slot."""
        return f"dcnode{self.slot}"

    @property
    def cgroup_root(self) -> str:
        """kubelet's cgroupRoot: every pod of this node lives below it."""
        return f"/devcluster-node{self.slot}"


def cni_config(addresses: Addresses, ipam_dir: Path) -> str:
    """A bridge network with host-local IPAM and port mappings, no masquerade."""
    return json.dumps(
        {
            "cniVersion": "1.0.0",
            "name": CNI_NETWORK,
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": BRIDGE,
                    "isGateway": True,
                    "ipMasq": False,
                    "hairpinMode": True,
                    "ipam": {
                        "type": "host-local",
                        "ranges": [[{"subnet": addresses.pod_cidr}]],
                        "routes": [{"dst": "0.0.0.0/0"}],
                        "dataDir": str(ipam_dir),
                    },
                },
                {"type": "portmap", "capabilities": {"portMappings": True}},
            ],
        },
        indent=2,
    )


def _toml_string(value: str) -> str:
    return json.dumps(value)  # a JSON string is a valid TOML basic string


def containerd_config(
    *, root: Path, state: Path, socket: Path, bin_dir: Path, cni_conf_dir: Path, hosts_dir: Path
) -> str:
    """containerd v2 (config version 3): CRI on a private socket, state under the
    plane's directory, our runc and CNI plugins, a preloaded sandbox image."""
    q = _toml_string
    return f"""\
version = 3
root = {q(str(root))}
state = {q(str(state))}

[grpc]
  address = {q(str(socket))}

[plugins.'io.containerd.cri.v1.images']
  snapshotter = 'overlayfs'
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = {q(SANDBOX_IMAGE)}
  [plugins.'io.containerd.cri.v1.images'.registry]
    config_path = {q(str(hosts_dir))}

[plugins.'io.containerd.cri.v1.runtime']
  netns_mounts_under_state_dir = true
  # A negative oom_score_adj (pause: -998, Guaranteed pods: -997) needs
  # CAP_SYS_RESOURCE, which some VMs and containers withhold even from root:
  # clamp at containerd's own score rather than fail every sandbox.
  restrict_oom_score_adj = true
  [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
    runtime_type = 'io.containerd.runc.v2'
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
      BinaryName = {q(str(bin_dir / "runc"))}
      SystemdCgroup = false
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = [{q(str(bin_dir))}]
    conf_dir = {q(str(cni_conf_dir))}

[plugins.'io.containerd.grpc.v1.cri']
  stream_server_address = '127.0.0.1'
"""


def registry_hosts() -> str:
    """hosts.toml for every registry (`_default`): pull from a closed loopback port only."""
    return f"server = {_toml_string(CLOSED_REGISTRY)}\n"


def kubelet_config(
    *,
    addresses: Addresses,
    mode: CgroupMode,
    socket: Path,
    client_ca: Path,
    resolv_conf: Path,
) -> str:
    config: dict[str, Any] = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "containerRuntimeEndpoint": f"unix://{socket}",
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": addresses.cgroup_root,
        "address": addresses.node_ip,
        "port": KUBELET_PORT,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": False},
            "x509": {"clientCAFile": str(client_ca)},
        },
        # Only the API server holds a client certificate of this CA for the kubelet port.
        "authorization": {"mode": "AlwaysAllow"},
        "resolvConf": str(resolv_conf),
        "failSwapOn": False,
        "serializeImagePulls": False,
        "rotateCertificates": False,
        # A shared, busy test host: evict only when it is really out of room.
        "evictionHard": {
            "memory.available": "100Mi",
            "nodefs.available": "1%",
            "imagefs.available": "1%",
        },
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
    }
    if mode is CgroupMode.V1:
        # kubelet refuses cgroup v1 unless told this host is known to be v1.
        config["failCgroupV1"] = False
    return yaml.safe_dump(config, sort_keys=False)


def kube_proxy_config(*, addresses: Addresses, kubeconfig: Path) -> str:
    config = {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "mode": "iptables",
        "hostnameOverride": NODE_NAME,
        "clusterCIDR": addresses.pod_cidr,
        "healthzBindAddress": "127.0.0.1:10256",
        "metricsBindAddress": "127.0.0.1:10249",
        # NodePorts on the node's address only (not its loopback: no route_localnet).
        "nodePortAddresses": ["primary"],
        # Leave the host's conntrack table size and timeouts alone.
        "conntrack": {
            "maxPerCore": 0,
            "min": 0,
            "tcpEstablishedTimeout": "0s",
            "tcpCloseWaitTimeout": "0s",
        },
    }
    return yaml.safe_dump(config, sort_keys=False)


def apiserver_flags(
    base: Sequence[str], addresses: Addresses, kubelet_client: KeyPair
) -> list[str]:
    """The shared API server command line, adapted to a real node.

    It listens on the host end of the veth pair (the node and its pods reach it
    there, through the `kubernetes` Service, whose endpoint the lease reconciler
    now maintains); webhooks and aggregated APIs go straight to an endpoint of
    their Service, so the host needs a route to the pod network only.
    """
    replaced = ("--bind-address=", "--advertise-address=", "--endpoint-reconciler-type=")
    flags = [flag for flag in base if not flag.startswith(replaced)]
    return [
        *flags,
        f"--bind-address={addresses.host_ip}",
        f"--advertise-address={addresses.host_ip}",
        "--endpoint-reconciler-type=lease",
        "--enable-aggregator-routing=true",
        f"--kubelet-client-certificate={kubelet_client.cert}",
        f"--kubelet-client-key={kubelet_client.key}",
        "--kubelet-preferred-address-types=InternalIP",
    ]
