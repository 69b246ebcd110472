"""CA and serving certificates: what a TLS client will check, checked here."""

from __future__ import annotations

import ipaddress
from datetime import UTC, datetime, timedelta

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID
from cryptography.x509.verification import PolicyBuilder, Store, VerificationError

from trussium_operator.certs.authority import (
    CertificateError,
    decode_certificates,
    decode_key_pair,
    decode_private_key,
    encode_certificates,
    generate_ca,
    issue_serving_certificate,
    needs_renewal,
    service_dns_names,
    serving_certificate_problem,
)

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
DNS = ["trussium-webhook.ops.svc", "trussium-webhook.ops.svc.cluster.local"]


def verify(
    leaf: x509.Certificate, cas: list[x509.Certificate], subject: x509.DNSName | x509.IPAddress
) -> None:
    """Verify as a web-PKI TLS client would (SAN, serverAuth, chain, validity)."""
    verifier = PolicyBuilder().store(Store(cas)).time(NOW).build_server_verifier(subject)
    verifier.verify(leaf, [])


def test_serving_certificate_verifies_for_each_dns_name_and_ip() -> None:
    ca = generate_ca("test-ca", now=NOW)
    serving = issue_serving_certificate(ca, DNS, ["127.0.0.1", "::1"], now=NOW)
    for name in DNS:
        verify(serving.certificate, [ca.certificate], x509.DNSName(name))
    for ip in ("127.0.0.1", "::1"):
        verify(serving.certificate, [ca.certificate], x509.IPAddress(ipaddress.ip_address(ip)))


def test_serving_certificate_does_not_verify_for_other_names_or_other_cas() -> None:
    ca = generate_ca("test-ca", now=NOW)
    serving = issue_serving_certificate(ca, DNS, ["127.0.0.1"], now=NOW)
    with pytest.raises(VerificationError):
        verify(serving.certificate, [ca.certificate], x509.DNSName("evil.example"))
    with pytest.raises(VerificationError):
        verify(serving.certificate, [ca.certificate], x509.IPAddress(ipaddress.ip_address("::1")))
    other = generate_ca("test-ca", now=NOW)
    with pytest.raises(VerificationError):
        verify(serving.certificate, [other.certificate], x509.DNSName(DNS[0]))


def test_keys_are_ecdsa_p256_and_extensions_are_as_documented() -> None:
    ca = generate_ca("test-ca", now=NOW)
    serving = issue_serving_certificate(ca, DNS, [], now=NOW)
    for pair in (ca, serving):
        assert isinstance(pair.private_key.curve, ec.SECP256R1)
    ext = ca.certificate.extensions
    constraints = ext.get_extension_for_class(x509.BasicConstraints)
    assert constraints.critical
    assert (constraints.value.ca, constraints.value.path_length) == (True, 0)
    usage = ext.get_extension_for_class(x509.KeyUsage).value
    assert usage.key_cert_sign
    assert usage.crl_sign
    assert not usage.digital_signature
    ski = ext.get_extension_for_class(x509.SubjectKeyIdentifier).value

    leaf = serving.certificate.extensions
    assert not leaf.get_extension_for_class(x509.BasicConstraints).value.ca
    assert leaf.get_extension_for_class(x509.KeyUsage).value.digital_signature
    assert list(leaf.get_extension_for_class(x509.ExtendedKeyUsage).value) == [
        ExtendedKeyUsageOID.SERVER_AUTH
    ]
    aki = leaf.get_extension_for_class(x509.AuthorityKeyIdentifier).value
    assert aki.key_identifier == ski.digest


def test_lifetimes_default_and_serving_never_outlives_its_ca() -> None:
    ca = generate_ca("test-ca", now=NOW)
    assert ca.certificate.not_valid_after_utc == NOW + timedelta(days=5 * 365)
    # Issued slightly in the past so an API server with a lagging clock accepts it.
    assert ca.certificate.not_valid_before_utc < NOW
    serving = issue_serving_certificate(ca, DNS, [], now=NOW)
    assert serving.certificate.not_valid_after_utc == NOW + timedelta(days=365)
    short_ca = generate_ca("test-ca", timedelta(days=30), now=NOW)
    capped = issue_serving_certificate(short_ca, DNS, [], now=NOW)
    assert capped.certificate.not_valid_after_utc == short_ca.certificate.not_valid_after_utc


def test_serving_certificate_needs_a_name() -> None:
    ca = generate_ca("test-ca", now=NOW)
    with pytest.raises(CertificateError, match="at least one"):
        issue_serving_certificate(ca, [], [], now=NOW)
    with pytest.raises(CertificateError, match="not-an-ip"):
        issue_serving_certificate(ca, DNS, ["not-an-ip"], now=NOW)


@pytest.mark.parametrize(
    ("days_elapsed", "expected"),
    [(0, False), (240, False), (244, True), (300, True), (400, True)],
)
def test_needs_renewal_when_less_than_a_third_of_the_lifetime_remains(
    days_elapsed: int, expected: bool
) -> None:
    ca = generate_ca("test-ca", now=NOW)
    serving = issue_serving_certificate(ca, DNS, [], timedelta(days=365), now=NOW)
    # Lifetime 365 days and 5 minutes: renewal is due after about 243.3 days.
    assert needs_renewal(serving.certificate, NOW + timedelta(days=days_elapsed)) is expected


def test_serving_certificate_problem_names_each_reason() -> None:
    ca = generate_ca("test-ca", now=NOW)
    serving = issue_serving_certificate(ca, DNS, ["127.0.0.1"], now=NOW)
    cert = serving.certificate
    assert serving_certificate_problem(cert, [ca.certificate], DNS, ["127.0.0.1"], NOW) is None
    other = generate_ca("test-ca", now=NOW).certificate
    assert "trusted CA" in str(serving_certificate_problem(cert, [other], DNS, [], NOW))
    assert "lacks" in str(
        serving_certificate_problem(cert, [ca.certificate], [*DNS, "new.example"], [], NOW)
    )
    assert "lacks" in str(serving_certificate_problem(cert, [ca.certificate], DNS, ["::1"], NOW))
    # Names the certificate has beyond the wanted ones are no reason to reissue.
    assert serving_certificate_problem(cert, [ca.certificate], DNS[:1], [], NOW) is None
    later = NOW + timedelta(days=300)
    assert "lifetime" in str(
        serving_certificate_problem(cert, [ca.certificate], DNS, ["127.0.0.1"], later)
    )


def test_pem_round_trip_and_mismatched_pairs_are_refused() -> None:
    ca = generate_ca("test-ca", now=NOW)
    serving = issue_serving_certificate(ca, DNS, [], now=NOW)
    bundle = encode_certificates([serving.certificate, ca.certificate])
    assert decode_certificates(bundle) == [serving.certificate, ca.certificate]
    assert decode_key_pair(bundle, serving.private_key_pem).certificate == serving.certificate
    with pytest.raises(CertificateError, match="does not belong"):
        decode_key_pair(serving.certificate_pem, ca.private_key_pem)


def test_decode_errors_never_quote_the_input() -> None:
    key_pem = generate_ca("test-ca", now=NOW).private_key_pem
    damaged = key_pem[:60] + b"!!" + key_pem[62:]
    with pytest.raises(CertificateError) as raised:
        decode_private_key(damaged)
    assert key_pem[30:60].decode() not in str(raised.value)
    with pytest.raises(CertificateError, match="PEM certificate"):
        decode_certificates(b"")


def test_service_dns_names_cover_every_form_the_api_server_may_use() -> None:
    assert service_dns_names("hook", "ops") == [
        "hook",
        "hook.ops",
        "hook.ops.svc",
        "hook.ops.svc.cluster.local",
    ]
