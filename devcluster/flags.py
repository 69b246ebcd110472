"""The command line of each component: a pure function of where things are."""

from pathlib import Path

from devcluster.components import KWOK_STAGES
from devcluster.layout import HOST, Layout, Ports
from devcluster.pki import Pki

SERVICE_CIDR = "10.96.0.0/16"
SERVICE_IP = "10.96.0.1"  # the `kubernetes` Service: first address of SERVICE_CIDR
POD_CIDR = "10.244.0.1/16"
SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc.cluster.local"
FAKE_NODE_ANNOTATION = "kwok.x-k8s.io/node"
FAKE_NODE_VALUE = "fake"
HPA_SYNC_PERIOD = "2s"

# One event per request (no RequestReceived stage), metadata only: enough to
# count requests by user and verb without ever recording a body (or a Secret).
AUDIT_POLICY = """\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
  - level: Metadata
"""


# MutatingAdmissionPolicy (tests use one to shorten a Deployment's progress
# deadline): alpha from 1.32, beta from 1.34, GA and on by default from 1.36.
MUTATING_ADMISSION_POLICY_VERSIONS = ((36, "v1"), (34, "v1beta1"), (32, "v1alpha1"))
MUTATING_ADMISSION_POLICY_GROUP = "admissionregistration.k8s.io"


def mutating_admission_policy_version(minor: int) -> str:
    """The version of admissionregistration.k8s.io that serves MutatingAdmissionPolicy."""
    for since, version in MUTATING_ADMISSION_POLICY_VERSIONS:
        if minor >= since:
            return version
    raise ValueError(f"Kubernetes 1.{minor} has no MutatingAdmissionPolicy")


def _by_minor(minor: int) -> list[str]:
    """What kube-apiserver 1.`minor` needs to serve what the tests use on every minor."""
    version = mutating_admission_policy_version(minor)
    if version == "v1":
        return []
    return [
        "--feature-gates=MutatingAdmissionPolicy=true",
        f"--runtime-config={MUTATING_ADMISSION_POLICY_GROUP}/{version}=true",
    ]


def etcd(bin_dir: Path, layout: Layout, ports: Ports) -> list[str]:
    client = f"http://{HOST}:{ports.etcd_client}"
    peer = f"http://{HOST}:{ports.etcd_peer}"
    return [
        str(bin_dir / "etcd"),
        "--name=devcluster",
        f"--data-dir={layout.etcd_data}",
        f"--listen-client-urls={client}",
        f"--advertise-client-urls={client}",
        f"--listen-peer-urls={peer}",
        f"--initial-advertise-peer-urls={peer}",
        f"--initial-cluster=devcluster={peer}",
        # Throwaway data: durability costs seconds on a busy disk and buys nothing.
        "--unsafe-no-fsync=true",
    ]


def apiserver(bin_dir: Path, layout: Layout, ports: Ports, pki: Pki, minor: int) -> list[str]:
    return [
        str(bin_dir / "kube-apiserver"),
        f"--etcd-servers=http://{HOST}:{ports.etcd_client}",
        f"--bind-address={HOST}",
        f"--advertise-address={HOST}",
        f"--secure-port={ports.apiserver}",
        f"--tls-cert-file={pki.serving.cert}",
        f"--tls-private-key-file={pki.serving.key}",
        f"--client-ca-file={pki.ca.cert}",
        "--authorization-mode=Node,RBAC",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        f"--service-account-issuer={SERVICE_ACCOUNT_ISSUER}",
        f"--service-account-key-file={pki.service_account_public_key}",
        f"--service-account-signing-key-file={pki.service_account_key}",
        # The `kubernetes` Service cannot point at a loopback address; nothing here needs it.
        "--endpoint-reconciler-type=none",
        "--allow-privileged=true",
        f"--audit-policy-file={layout.audit_policy}",
        f"--audit-log-path={layout.audit_log}",
        f"--cert-dir={layout.pki}",
        *_by_minor(minor),
    ]


def _api_client_component(binary: Path, kubeconfig: Path, port: int, layout: Layout) -> list[str]:
    """What kube-controller-manager and kube-scheduler share: one identity for the API
    server and for delegated authn/authz, a secure port on HOST, no leader election."""
    return [
        str(binary),
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        f"--bind-address={HOST}",
        f"--secure-port={port}",
        f"--cert-dir={layout.pki}",
        "--leader-elect=false",
    ]


def controller_manager(bin_dir: Path, layout: Layout, ports: Ports, pki: Pki) -> list[str]:
    kubeconfig = layout.kubeconfig("controller-manager")
    return [
        *_api_client_component(
            bin_dir / "kube-controller-manager", kubeconfig, ports.controller_manager, layout
        ),
        # Every default controller; the cloud ones stay off without a cloud provider.
        "--controllers=*",
        # Each controller acts as its own ServiceAccount, as in a real cluster,
        # so audit records and RBAC denials name the controller.
        "--use-service-account-credentials=true",
        f"--service-account-private-key-file={pki.service_account_key}",
        f"--root-ca-file={pki.ca.cert}",
        f"--cluster-signing-cert-file={pki.ca.cert}",
        f"--cluster-signing-key-file={pki.ca.key}",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        # An autoscaler acts within seconds of its metrics changing, not after the
        # default 15 s; a sync with no HorizontalPodAutoscaler to read costs nothing.
        f"--horizontal-pod-autoscaler-sync-period={HPA_SYNC_PERIOD}",
    ]


def scheduler(bin_dir: Path, layout: Layout, ports: Ports) -> list[str]:
    kubeconfig = layout.kubeconfig("scheduler")
    return _api_client_component(bin_dir / "kube-scheduler", kubeconfig, ports.scheduler, layout)


def kwok(bin_dir: Path, layout: Layout, ports: Ports) -> list[str]:
    return [
        str(bin_dir / "kwok"),
        f"--kubeconfig={layout.kubeconfig('kwok')}",
        # kwok's default "fast" stages (build.sh extracts them from the pinned kwok);
        # an explicit --config also keeps kwok from reading ~/.kwok.
        f"--config={bin_dir / KWOK_STAGES}",
        "--manage-all-nodes=false",
        f"--manage-nodes-with-annotation-selector={FAKE_NODE_ANNOTATION}={FAKE_NODE_VALUE}",
        f"--cidr={POD_CIDR}",
        # The default stages heartbeat node status only every 10-20 min and expect
        # a renewed node Lease in between; without one, nodes (and their pods) go NotReady.
        "--node-lease-duration-seconds=40",
        f"--server-address={HOST}:{ports.kwok}",
    ]
