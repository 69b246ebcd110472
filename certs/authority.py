"""A private certificate authority for the webhook's serving certificate.

Pure apart from key generation: the clock is an argument, so lifetimes and
renewal decisions are testable without waiting. ECDSA P-256 keeps handshakes
cheap and is accepted by every supported Kubernetes API server.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# The package's one error, defined where the webhook's reloader can import it without
# the cryptography package; re-exported here for every other user.
from trussium_operator.certs.served import CertificateError as CertificateError

CA_VALIDITY = timedelta(days=5 * 365)
SERVING_VALIDITY = timedelta(days=365)
RENEW_FRACTION = 1 / 3
# Certificates start this far in the past so that an API server whose clock is
# slightly behind ours does not reject a certificate issued a moment ago.
CLOCK_SKEW_ALLOWANCE = timedelta(minutes=5)

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True)
class KeyPair:
    """A certificate with its private key; equal when the certificates are."""

    certificate: x509.Certificate
    private_key: ec.EllipticCurvePrivateKey = field(compare=False)

    @property
    def certificate_pem(self) -> bytes:
        return encode_certificates([self.certificate])

    @property
    def private_key_pem(self) -> bytes:
        return encode_private_key(self.private_key)


def generate_ca(common_name: str, validity: timedelta = CA_VALIDITY, *, now: datetime) -> KeyPair:
    """A self-signed CA that may sign end-entity certificates only (pathlen 0)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    not_before = now - CLOCK_SKEW_ALLOWANCE
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(now + validity)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(cert_sign=True), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return KeyPair(certificate, key)


def issue_serving_certificate(
    ca: KeyPair,
    dns_names: Sequence[str],
    ip_addresses: Sequence[str] = (),
    validity: timedelta = SERVING_VALIDITY,
    *,
    now: datetime,
) -> KeyPair:
    """A TLS server certificate for the given names, never outliving its CA."""
    ips = parse_ip_addresses(ip_addresses)
    if not dns_names and not ips:
        raise CertificateError("a serving certificate needs at least one DNS name or IP address")
    key = ec.generate_private_key(ec.SECP256R1())
    common_name = dns_names[0] if dns_names else str(ips[0])
    not_after = min(now + validity, ca.certificate.not_valid_after_utc)
    san: list[x509.GeneralName] = [x509.DNSName(name) for name in dns_names]
    san += [x509.IPAddress(ip) for ip in ips]
    ca_ski = ca.certificate.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    certificate = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
        .issuer_name(ca.certificate.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - CLOCK_SKEW_ALLOWANCE)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(cert_sign=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName(san), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski), critical=False
        )
        .sign(ca.private_key, hashes.SHA256())
    )
    return KeyPair(certificate, key)


def needs_renewal(
    certificate: x509.Certificate, now: datetime, fraction: float = RENEW_FRACTION
) -> bool:
    """True once less than `fraction` of the certificate's lifetime remains."""
    not_before = certificate.not_valid_before_utc
    not_after = certificate.not_valid_after_utc
    return not_after - now < (not_after - not_before) * fraction


def serving_certificate_problem(
    certificate: x509.Certificate,
    trusted_cas: Iterable[x509.Certificate],
    dns_names: Sequence[str],
    ip_addresses: Sequence[str],
    now: datetime,
    fraction: float = RENEW_FRACTION,
) -> str | None:
    """Why the serving certificate must be reissued, or None when it is fine."""
    if not any(is_issued_by(certificate, ca) for ca in trusted_cas):
        return "it is not signed by a trusted CA"
    # Extra names are tolerated: during a rollout that adds a name, old
    # replicas accept the new certificate instead of reissuing it back.
    dns, ips = subject_alternative_names(certificate)
    if not (set(dns_names) <= dns and set(parse_ip_addresses(ip_addresses)) <= ips):
        return "it lacks some of the wanted names"
    if needs_renewal(certificate, now, fraction):
        return "less than its renewal fraction of lifetime remains"
    return None


def is_issued_by(certificate: x509.Certificate, ca: x509.Certificate) -> bool:
    try:
        certificate.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def subject_alternative_names(
    certificate: x509.Certificate,
) -> tuple[frozenset[str], frozenset[IPAddress]]:
    """The (DNS names, IP addresses) a certificate is valid for."""
    try:
        san = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return frozenset(), frozenset()
    ips = {ip for ip in san.get_values_for_type(x509.IPAddress) if not isinstance(ip, _Networks)}
    return frozenset(san.get_values_for_type(x509.DNSName)), frozenset(ips)


def service_dns_names(service: str, namespace: str) -> list[str]:
    """The names the API server may use to reach a Service-backed webhook."""
    return [
        service,
        f"{service}.{namespace}",
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.cluster.local",
    ]


def parse_ip_addresses(values: Iterable[str]) -> list[IPAddress]:
    try:
        return [ipaddress.ip_address(value) for value in values]
    except ValueError as error:
        raise CertificateError(str(error)) from None


def encode_certificates(certificates: Iterable[x509.Certificate]) -> bytes:
    return b"".join(c.public_bytes(serialization.Encoding.PEM) for c in certificates)


def encode_private_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def decode_certificates(pem: bytes) -> list[x509.Certificate]:
    """All certificates of a PEM bundle, in order; at least one."""
    try:
        certificates = x509.load_pem_x509_certificates(pem)
    except ValueError:
        raise CertificateError("not a PEM certificate bundle") from None
    return certificates


def decode_private_key(pem: bytes) -> ec.EllipticCurvePrivateKey:
    try:
        key = serialization.load_pem_private_key(pem, password=None)
    except (ValueError, TypeError):
        # The parser's message may quote the input; say only what went wrong.
        raise CertificateError("not an unencrypted PEM private key") from None
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise CertificateError("the private key is not an ECDSA key")
    return key


def decode_key_pair(certificate_pem: bytes, key_pem: bytes) -> KeyPair:
    """The first certificate of `certificate_pem` with its key; they must match."""
    certificate = decode_certificates(certificate_pem)[0]
    key = decode_private_key(key_pem)
    if certificate.public_key() != key.public_key():
        raise CertificateError("the private key does not belong to the certificate")
    return KeyPair(certificate, key)


_Networks = (ipaddress.IPv4Network, ipaddress.IPv6Network)


def _key_usage(*, cert_sign: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=not cert_sign,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=cert_sign,
        crl_sign=cert_sign,
        encipher_only=False,
        decipher_only=False,
    )
