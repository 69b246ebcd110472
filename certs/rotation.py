"""What the self-managed Secrets should hold next: the renewal decision, pure.

Two Secrets (docs/adr/0029): the CA Secret keeps the CA bundle (signing CA
first, older CAs after it) and the signing CA's key, and only the controller
reads it; the serving Secret keeps the serving certificate and its key (plus
the bundle as `ca.crt`), and the webhook pods mount it. A renewed CA joins the
bundle first and only signs the serving certificate once it has been trusted
for `Lifetimes.ca_adoption_delay`, so every API server has the new bundle
before any pod serves a certificate that needs it. An older CA leaves the
bundle once the serving certificate it signed has been replaced for
`Lifetimes.propagation`, the time a Secret change takes to reach every pod.
A CA whose key the webhook pods could read (the layout before ADR 0029) is
replaced the same way, at once instead of when due.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from cryptography import x509

from trussium_operator.certs.authority import (
    CA_VALIDITY,
    CLOCK_SKEW_ALLOWANCE,
    RENEW_FRACTION,
    SERVING_VALIDITY,
    CertificateError,
    KeyPair,
    decode_certificates,
    decode_key_pair,
    encode_certificates,
    generate_ca,
    is_issued_by,
    issue_serving_certificate,
    needs_renewal,
    serving_certificate_problem,
)

SECRET_CA_CERT_KEY = "ca.crt"
SECRET_TLS_CERT_KEY = "tls.crt"
SECRET_TLS_KEY_KEY = "tls.key"
# Where the webhook kept the CA key before ADR 0029: in the serving Secret.
LEGACY_CA_KEY_KEY = "ca.key"
CA_COMMON_NAME = "trussium-webhook-ca"


@dataclass(frozen=True)
class Lifetimes:
    ca: timedelta = CA_VALIDITY
    serving: timedelta = SERVING_VALIDITY
    renew_fraction: float = RENEW_FRACTION
    # How long a new CA is trusted before it signs: API servers see a new caBundle in seconds.
    ca_adoption_delay: timedelta = timedelta(hours=1)
    # How long a new serving certificate takes to be served by every pod: the kubelet
    # refreshes a mounted Secret within about a minute, the webhook polls every 5 s.
    propagation: timedelta = timedelta(hours=1)


DEFAULT_LIFETIMES = Lifetimes()


@dataclass(frozen=True)
class Authority:
    """The CA Secret: the signing CA with its key, and older CAs still trusted."""

    signing_ca: KeyPair
    older_cas: tuple[x509.Certificate, ...] = ()

    @property
    def bundle(self) -> tuple[x509.Certificate, ...]:
        return (self.signing_ca.certificate, *self.older_cas)

    @property
    def bundle_pem(self) -> bytes:
        return encode_certificates(self.bundle)

    def to_secret_data(self) -> dict[str, bytes]:
        """As a `kubernetes.io/tls` Secret, the layout of cert-manager's CA Secrets."""
        return {
            SECRET_TLS_CERT_KEY: self.signing_ca.certificate_pem,
            SECRET_TLS_KEY_KEY: self.signing_ca.private_key_pem,
            SECRET_CA_CERT_KEY: self.bundle_pem,
        }

    @classmethod
    def from_secret_data(cls, data: Mapping[str, bytes]) -> Authority:
        _require(data, (SECRET_TLS_CERT_KEY, SECRET_TLS_KEY_KEY, SECRET_CA_CERT_KEY))
        return cls._from(data[SECRET_CA_CERT_KEY], data[SECRET_TLS_KEY_KEY])

    @classmethod
    def from_legacy_secret_data(cls, data: Mapping[str, bytes]) -> Authority:
        """The CA of a serving Secret written before ADR 0029 (bundle in ca.crt, key in ca.key)."""
        _require(data, (SECRET_CA_CERT_KEY, LEGACY_CA_KEY_KEY))
        return cls._from(data[SECRET_CA_CERT_KEY], data[LEGACY_CA_KEY_KEY])

    @classmethod
    def _from(cls, bundle_pem: bytes, key_pem: bytes) -> Authority:
        bundle = decode_certificates(bundle_pem)
        signing = decode_key_pair(encode_certificates(bundle[:1]), key_pem)
        return cls(signing, tuple(bundle[1:]))


def serving_secret_data(serving: KeyPair, authority: Authority) -> dict[str, bytes]:
    """The serving Secret: what the webhook pods mount, never the CA key."""
    return {
        SECRET_TLS_CERT_KEY: serving.certificate_pem,
        SECRET_TLS_KEY_KEY: serving.private_key_pem,
        SECRET_CA_CERT_KEY: authority.bundle_pem,
    }


def serving_from_secret_data(data: Mapping[str, bytes]) -> KeyPair:
    _require(data, (SECRET_TLS_CERT_KEY, SECRET_TLS_KEY_KEY))
    return decode_key_pair(data[SECRET_TLS_CERT_KEY], data[SECRET_TLS_KEY_KEY])


@dataclass(frozen=True)
class Rotation:
    authority: Authority
    serving: KeyPair
    reasons: tuple[str, ...] = field(default=())

    @property
    def changed(self) -> bool:
        return bool(self.reasons)


def rotate(
    authority: Authority | None,
    serving: KeyPair | None,
    *,
    dns_names: Sequence[str],
    ip_addresses: Sequence[str],
    now: datetime,
    lifetimes: Lifetimes = DEFAULT_LIFETIMES,
    exposed: bool = False,
) -> Rotation:
    """The CA and serving certificate to keep, with the reasons they differ (none: unchanged).

    `exposed`: the signing CA's key was readable outside the CA Secret; it is renewed
    now, as if due, so the CA whose key may have leaked leaves the bundle in two hours.
    """

    def issue(ca: KeyPair) -> KeyPair:
        return issue_serving_certificate(ca, dns_names, ip_addresses, lifetimes.serving, now=now)

    if authority is None or authority.signing_ca.certificate.not_valid_after_utc <= now:
        signing = generate_ca(CA_COMMON_NAME, lifetimes.ca, now=now)
        return Rotation(Authority(signing), issue(signing), ("no valid CA yet",))

    reasons: list[str] = []
    signing = authority.signing_ca
    older = tuple(ca for ca in authority.older_cas if ca.not_valid_after_utc > now)
    if len(older) != len(authority.older_cas):
        reasons.append("expired CAs dropped from the bundle")
    problem = (
        "there is none"
        if serving is None
        else serving_certificate_problem(
            serving.certificate,
            (signing.certificate, *older),
            dns_names,
            ip_addresses,
            now,
            lifetimes.renew_fraction,
        )
    )
    if exposed or needs_renewal(signing.certificate, now, lifetimes.renew_fraction):
        # A due serving certificate is refreshed by the outgoing CA, which every
        # client trusts already, so nothing needs the new CA before it is adopted.
        if problem is not None:
            serving = issue(signing)
            reasons.append(f"serving certificate reissued: {problem}")
            problem = None
        older = (signing.certificate, *older)
        signing = generate_ca(CA_COMMON_NAME, lifetimes.ca, now=now)
        reasons.append("CA renewed: its key was in the serving Secret" if exposed else "CA renewed")
    elif (
        problem is None
        and serving is not None
        and not is_issued_by(serving.certificate, signing.certificate)
        and now - signing.certificate.not_valid_before_utc >= lifetimes.ca_adoption_delay
    ):
        problem = "the renewed CA is trusted everywhere by now"
    if problem is not None or serving is None:
        serving = issue(signing)
        reasons.append(f"serving certificate reissued: {problem}")
    needed = tuple(ca for ca in older if _still_needed(ca, serving.certificate, now, lifetimes))
    if len(needed) != len(older):
        reasons.append("CAs no serving certificate needs dropped from the bundle")
    return Rotation(Authority(signing, needed), serving, tuple(reasons))


def _still_needed(
    ca: x509.Certificate, serving: x509.Certificate, now: datetime, lifetimes: Lifetimes
) -> bool:
    """A CA stays trusted while it signed the serving certificate, or while a pod may
    still serve the one before it (the current one was issued less than `propagation` ago)."""
    issued_at = serving.not_valid_before_utc + CLOCK_SKEW_ALLOWANCE
    return is_issued_by(serving, ca) or now - issued_at < lifetimes.propagation


def _require(data: Mapping[str, bytes], keys: Sequence[str]) -> None:
    missing = [key for key in keys if not data.get(key)]
    if missing:
        raise CertificateError(f"missing keys: {', '.join(missing)}")
