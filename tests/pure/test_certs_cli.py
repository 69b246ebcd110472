"""`trussium-webhook certs generate|inject` without a cluster."""

from __future__ import annotations

import ipaddress
from datetime import UTC, datetime
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.x509.verification import PolicyBuilder, Store

from trussium_operator.certs.authority import decode_certificates
from trussium_operator.webhook.certs_cli import main_certs


def verify_for_loopback(folder: Path) -> x509.Certificate:
    leaf = decode_certificates((folder / "tls.crt").read_bytes())[0]
    store = Store(decode_certificates((folder / "ca.crt").read_bytes()))
    verifier = (
        PolicyBuilder()
        .store(store)
        .time(datetime.now(UTC))
        .build_server_verifier(x509.IPAddress(ipaddress.ip_address("127.0.0.1")))
    )
    verifier.verify(leaf, [])
    return leaf


def test_generate_writes_a_verifiable_folder(tmp_path: Path) -> None:
    out = tmp_path / "out"
    args = ["generate", "--out", str(out), "--dns-name", "hook.ops.svc"]
    assert main_certs([*args, "--ip-address", "127.0.0.1", "--validity-days", "7"]) == 0
    leaf = verify_for_loopback(out)
    lifetime = leaf.not_valid_after_utc - leaf.not_valid_before_utc
    assert 7 <= lifetime.days <= 8
    assert (out / "tls.key").stat().st_mode & 0o077 == 0


def test_generate_reuses_the_ca_in_ca_dir(tmp_path: Path) -> None:
    ca_dir = tmp_path / "ca"
    for out in ("one", "two"):
        args = ["generate", "--out", str(tmp_path / out), "--ip-address", "127.0.0.1"]
        assert main_certs([*args, "--ca-dir", str(ca_dir)]) == 0
    assert (tmp_path / "one" / "ca.crt").read_bytes() == (ca_dir / "ca.crt").read_bytes()
    assert (tmp_path / "two" / "ca.crt").read_bytes() == (ca_dir / "ca.crt").read_bytes()
    verify_for_loopback(tmp_path / "two")
    assert (ca_dir / "ca.key").stat().st_mode & 0o077 == 0


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ([], "at least one --dns-name or --ip-address"),
        (["--ip-address", "localhost"], "does not appear to be an IPv4 or IPv6 address"),
    ],
)
def test_generate_explains_bad_names_in_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    assert main_certs(["generate", "--out", str(tmp_path / "out"), *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith("trussium-webhook certs generate: error: ")
    assert message in err
    assert err.count("\n") == 1
    assert not (tmp_path / "out").exists()


def test_generate_refuses_an_unusable_ca_dir_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ca_dir = tmp_path / "ca"
    ca_dir.mkdir()
    (ca_dir / "ca.key").write_text("not a key\n")
    (ca_dir / "ca.crt").write_text("not a certificate\n")
    args = ["generate", "--out", str(tmp_path / "out"), "--ip-address", "127.0.0.1"]
    assert main_certs([*args, "--ca-dir", str(ca_dir)]) == 2
    assert capsys.readouterr().err.startswith("trussium-webhook certs generate: error: ")


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as raised:
        main_certs(["generate", "--out", str(tmp_path), "--validity-days", "0"])
    assert raised.value.code == 2
    with pytest.raises(SystemExit) as raised:
        main_certs(["inject"])
    assert raised.value.code == 2


def test_inject_refuses_a_file_that_is_not_a_certificate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    not_a_cert = tmp_path / "ca.crt"
    not_a_cert.write_text("hello\n")
    assert main_certs(["inject", "--ca-file", str(not_a_cert)]) == 2
    assert "not a PEM certificate bundle" in capsys.readouterr().err
    assert main_certs(["inject", "--ca-file", str(tmp_path / "absent.crt")]) == 2
    assert "No such file" in capsys.readouterr().err


def test_inject_with_an_unusable_kubeconfig_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main_certs(["generate", "--out", str(tmp_path), "--ip-address", "127.0.0.1"]) == 0
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\nclusters: []\n")
    args = ["inject", "--ca-file", str(tmp_path / "ca.crt"), "--kubeconfig", str(kubeconfig)]
    capsys.readouterr()
    assert main_certs(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("trussium-webhook certs inject: error: ")
    assert err.count("\n") == 1
