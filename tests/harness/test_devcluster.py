"""The local control plane's pure pieces: pins, PKI and node readiness."""

import ipaddress
import stat
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.x509.oid import NameOID
from cryptography.x509.verification import PolicyBuilder, Store

from devcluster.components import ComponentsError, parse_versions, pinned_versions
from devcluster.controlplane import IDENTITIES, fake_node, node_ready
from devcluster.pki import write_pki


def test_pins_name_every_component_version() -> None:
    pins = pinned_versions()
    for key in ("KUBERNETES_VERSION", "ETCD_VERSION", "KWOK_VERSION", "HELM_VERSION"):
        assert pins[key].startswith("v")


def test_a_malformed_pin_line_is_reported_with_its_number() -> None:
    with pytest.raises(ComponentsError, match="line 3"):
        parse_versions("# pins\nA=1\nnot a pin\n")


def test_pki_serves_the_apiserver_names_and_authenticates_each_identity(tmp_path: Path) -> None:
    pki = write_pki(tmp_path, IDENTITIES, "10.96.0.1")
    ca = x509.load_pem_x509_certificate(pki.ca.cert.read_bytes())
    serving = x509.load_pem_x509_certificate(pki.serving.cert.read_bytes())
    store = Store([ca])
    for name in ("kubernetes.default.svc", "localhost"):
        PolicyBuilder().store(store).build_server_verifier(x509.DNSName(name)).verify(serving, [])
    loopback = x509.IPAddress(ipaddress.ip_address("127.0.0.1"))
    PolicyBuilder().store(store).build_server_verifier(loopback).verify(serving, [])

    admin = x509.load_pem_x509_certificate(pki.clients["admin"].cert.read_bytes())
    admin.verify_directly_issued_by(ca)
    groups = [a.value for a in admin.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)]
    assert groups == ["system:masters"]
    for key in (pki.ca.key, pki.service_account_key, pki.clients["admin"].key):
        assert stat.S_IMODE(key.stat().st_mode) == 0o600


def test_a_node_counts_as_ready_only_when_ready_and_untainted() -> None:
    node = fake_node("n", "zone")
    assert not node_ready(node)
    node["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    assert node_ready(node)
    node["spec"] = {"taints": [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]}
    assert not node_ready(node)
