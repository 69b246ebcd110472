"""The reloader's reading of a certificate agrees with the cryptography package's."""

from __future__ import annotations

import base64
import contextlib
from datetime import UTC, datetime, timedelta

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID

from trussium_operator.certs.authority import (
    encode_certificates,
    generate_ca,
    issue_serving_certificate,
)
from trussium_operator.certs.served import CertificateError, read_served_certificate

NOW = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)


def rsa_certificate(not_after: datetime) -> x509.Certificate:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "rsa")])
    return (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(NOW)
        .not_valid_after(not_after)
        .sign(key, hashes.SHA256())
    )


@pytest.mark.parametrize(
    "validity",
    [timedelta(days=365), timedelta(days=40 * 365)],  # UTCTime, then GeneralizedTime past 2049
)
def test_serial_and_expiry_are_the_certificates(validity: timedelta) -> None:
    ca = generate_ca("test-ca", validity, now=NOW)
    serving = issue_serving_certificate(ca, ["localhost"], validity=validity, now=NOW)
    for pair in (ca, serving):
        served = read_served_certificate(pair.certificate_pem)
        assert served.serial_number == pair.certificate.serial_number
        assert served.not_after == pair.certificate.not_valid_after_utc
        assert served.ecdsa


def test_the_first_certificate_of_a_bundle_is_read_past_other_blocks() -> None:
    ca = generate_ca("test-ca", now=NOW)
    serving = issue_serving_certificate(ca, ["localhost"], now=NOW)
    bundle = ca.private_key_pem + encode_certificates([serving.certificate, ca.certificate])
    assert read_served_certificate(bundle).serial_number == serving.certificate.serial_number


def test_an_rsa_certificate_is_told_apart() -> None:
    certificate = rsa_certificate(NOW + timedelta(days=30))
    served = read_served_certificate(certificate.public_bytes(serialization.Encoding.PEM))
    assert not served.ecdsa
    assert served.not_after == certificate.not_valid_after_utc


def as_pem(der: bytes) -> bytes:
    body = base64.encodebytes(der)
    return b"-----BEGIN CERTIFICATE-----\n" + body + b"-----END CERTIFICATE-----\n"


def test_damaged_certificates_are_certificate_errors_and_nothing_else() -> None:
    der = generate_ca("test-ca", now=NOW).certificate.public_bytes(serialization.Encoding.DER)
    for end in range(len(der)):
        with pytest.raises(CertificateError):
            read_served_certificate(as_pem(der[:end]))
    for at in range(len(der)):  # each byte damaged: read as something, or refused
        for byte in (0x00, 0x84, 0xFF):
            with contextlib.suppress(CertificateError):
                read_served_certificate(as_pem(der[:at] + bytes([byte]) + der[at + 1 :]))
    for text in (b"", b"not pem", generate_ca("test-ca", now=NOW).private_key_pem):
        with pytest.raises(CertificateError, match="not a PEM certificate bundle"):
            read_served_certificate(text)
