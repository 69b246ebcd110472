"""The throwaway PKI of one local control plane: a CA, the API server's
serving certificate, one client certificate per identity, and the
service-account signing key. ECDSA P-256 keeps generation instant."""

import datetime
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALIDITY = datetime.timedelta(days=7)
SERVING_DNS_NAMES = (
    "localhost",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
)


@dataclass(frozen=True)
class Identity:
    """Who a client certificate authenticates as (user name and groups)."""

    user: str
    groups: tuple[str, ...] = ()


@dataclass(frozen=True)
class KeyPair:
    cert: Path
    key: Path


@dataclass(frozen=True)
class Pki:
    ca: KeyPair
    serving: KeyPair
    service_account_key: Path
    service_account_public_key: Path
    clients: dict[str, KeyPair]


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _write(path: Path, data: bytes) -> Path:
    path.touch(mode=0o600)
    path.write_bytes(data)
    return path


def _issue(
    subject: x509.Name,
    key: ec.EllipticCurvePrivateKey,
    issuer: x509.Name,
    issuer_key: ec.EllipticCurvePrivateKey,
    extensions: list[tuple[x509.ExtensionType, bool]],
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()),
            critical=False,
        )
    )
    for extension, critical in extensions:
        builder = builder.add_extension(extension, critical=critical)
    return builder.sign(issuer_key, hashes.SHA256())


def _key_usage(*, ca: bool) -> x509.KeyUsage:
    """Signatures for every certificate; signing certificates and CRLs only for the CA."""
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=ca,
        crl_sign=ca,
        encipher_only=False,
        decipher_only=False,
    )


def _leaf_extensions(usage: x509.ObjectIdentifier) -> list[tuple[x509.ExtensionType, bool]]:
    return [
        (x509.BasicConstraints(ca=False, path_length=None), True),
        (_key_usage(ca=False), True),
        (x509.ExtendedKeyUsage([usage]), False),
    ]


def _write_pair(
    directory: Path, name: str, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey
) -> KeyPair:
    return KeyPair(
        cert=_write(directory / f"{name}.crt", cert.public_bytes(serialization.Encoding.PEM)),
        key=_write(directory / f"{name}.key", _key_pem(key)),
    )


def write_pki(
    directory: Path,
    clients: dict[str, Identity],
    service_ip: str,
    extra_ips: Sequence[str] = (),
) -> Pki:
    """Create every key and certificate under `directory` (files readable by the owner only);
    the API server's certificate is valid for 127.0.0.1, `service_ip` and `extra_ips`."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "devcluster-ca")])
    ca_cert = _issue(
        ca_name,
        ca_key,
        ca_name,
        ca_key,
        [
            (x509.BasicConstraints(ca=True, path_length=None), True),
            (_key_usage(ca=True), True),
        ],
    )

    serving_key = ec.generate_private_key(ec.SECP256R1())
    sans: list[x509.GeneralName] = [x509.DNSName(name) for name in SERVING_DNS_NAMES]
    sans += [
        x509.IPAddress(ipaddress.ip_address(ip)) for ip in ("127.0.0.1", service_ip, *extra_ips)
    ]
    serving_cert = _issue(
        x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]),
        serving_key,
        ca_name,
        ca_key,
        [
            *_leaf_extensions(ExtendedKeyUsageOID.SERVER_AUTH),
            (x509.SubjectAlternativeName(sans), False),
        ],
    )

    client_pairs: dict[str, KeyPair] = {}
    for name, identity in clients.items():
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name(
            [x509.NameAttribute(NameOID.ORGANIZATION_NAME, group) for group in identity.groups]
            + [x509.NameAttribute(NameOID.COMMON_NAME, identity.user)]
        )
        cert = _issue(
            subject, key, ca_name, ca_key, _leaf_extensions(ExtendedKeyUsageOID.CLIENT_AUTH)
        )
        client_pairs[name] = _write_pair(directory, f"client-{name}", cert, key)

    sa_key = ec.generate_private_key(ec.SECP256R1())
    sa_public = sa_key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return Pki(
        ca=_write_pair(directory, "ca", ca_cert, ca_key),
        serving=_write_pair(directory, "apiserver", serving_cert, serving_key),
        service_account_key=_write(directory / "sa.key", _key_pem(sa_key)),
        service_account_public_key=_write(directory / "sa.pub", sa_public),
        clients=client_pairs,
    )
