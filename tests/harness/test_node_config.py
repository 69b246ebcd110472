"""The node profile's configuration, read without starting anything."""

import json
import os
import shutil
from pathlib import Path

import pytest
import yaml

from devcluster import node, nodeconfig
from devcluster.nodeconfig import Addresses, CgroupMode
from devcluster.pki import KeyPair

HYBRID = """\
25 1 254:0 / / rw,relatime - ext4 /dev/vda rw
30 25 0:26 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
31 30 0:27 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
32 30 0:28 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
"""
UNIFIED = """\
25 1 254:0 / / rw,relatime - ext4 /dev/vda rw
30 25 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime - cgroup2 cgroup2 rw
"""


def test_the_cgroup_mode_is_read_from_the_mount_table() -> None:
    assert nodeconfig.cgroup_mode(HYBRID) is CgroupMode.V1
    assert nodeconfig.cgroup_mode(UNIFIED) is CgroupMode.V2
    assert nodeconfig.cgroup_mounts(HYBRID) == [
        Path("/sys/fs/cgroup/memory"),
        Path("/sys/fs/cgroup/unified"),
    ]
    assert nodeconfig.cgroup_mounts(UNIFIED) == [Path("/sys/fs/cgroup")]


def kubelet(mode: CgroupMode) -> dict[str, object]:
    text = nodeconfig.kubelet_config(
        addresses=Addresses(3),
        mode=mode,
        socket=Path("/x/containerd.sock"),
        client_ca=Path("/x/ca.crt"),
        resolv_conf=Path("/x/resolv.conf"),
    )
    config: dict[str, object] = yaml.safe_load(text)
    return config


def test_kubelet_is_allowed_cgroup_v1_only_on_a_v1_host() -> None:
    assert kubelet(CgroupMode.V1)["failCgroupV1"] is False
    assert "failCgroupV1" not in kubelet(CgroupMode.V2)
    assert kubelet(CgroupMode.V1)["cgroupRoot"] == "/devcluster-node3"
    assert kubelet(CgroupMode.V1)["address"] == "10.200.3.2"


def test_slots_give_disjoint_networks_and_reject_out_of_range() -> None:
    a, b = Addresses(0), Addresses(1)
    assert (a.host_ip, a.node_ip, a.pod_cidr, a.gateway) == (
        "10.200.0.1",
        "10.200.0.2",
        "10.201.0.0/24",
        "10.201.0.1",
    )
    assert a.pod_cidr != b.pod_cidr
    assert a.host_link != b.host_link
    with pytest.raises(ValueError, match="out of range"):
        Addresses(nodeconfig.SLOTS)


def test_every_registry_is_a_closed_loopback_port() -> None:
    assert nodeconfig.registry_hosts() == 'server = "http://127.0.0.1:1"\n'
    network = json.loads(nodeconfig.cni_config(Addresses(2), Path("/x/ipam")))
    bridge = network["plugins"][0]
    assert bridge["ipMasq"] is False
    assert bridge["ipam"]["ranges"] == [[{"subnet": "10.201.2.0/24"}]]


def test_the_apiserver_listens_on_the_veth_and_routes_to_endpoints() -> None:
    base = [
        "kube-apiserver",
        "--bind-address=127.0.0.1",
        "--advertise-address=127.0.0.1",
        "--endpoint-reconciler-type=none",
        "--secure-port=6443",
    ]
    client = KeyPair(Path("/x/c.crt"), Path("/x/c.key"))
    flags = nodeconfig.apiserver_flags(base, Addresses(4), client)
    assert "--bind-address=127.0.0.1" not in flags
    assert "--endpoint-reconciler-type=none" not in flags
    assert "--bind-address=10.200.4.1" in flags
    assert "--advertise-address=10.200.4.1" in flags
    assert "--enable-aggregator-routing=true" in flags
    assert "--secure-port=6443" in flags
    assert "--kubelet-client-certificate=/x/c.crt" in flags


def test_a_host_that_cannot_run_a_node_gets_a_one_line_reason(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    reason = node.unsupported_reason()
    assert reason is not None
    assert "root" in reason
    assert "\n" not in reason

    monkeypatch.setattr(os, "geteuid", lambda: 0)
    real_which = shutil.which
    monkeypatch.setattr(
        shutil, "which", lambda tool: None if tool == "iptables" else real_which(tool)
    )
    assert node.unsupported_reason() == (
        "the node profile needs `iptables` (hack/setup-host.sh installs it)"
    )
