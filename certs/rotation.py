"""What the self-managed Secret should hold next: the renewal decision, pure.

The Secret keeps a CA bundle (signing CA first, older CAs after it until
they expire), the signing CA's key and the serving certificate. A renewed CA
joins the bundle first and only signs the serving certificate once it has
been trusted for `Lifetimes.ca_adoption_delay`, so every API server has the
new bundle before any replica serves a certificate that needs it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from cryptography import x509

from trussium_operator.certs.authority import (
    CA_VALIDITY,
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
SECRET_CA_KEY_KEY = "ca.key"
SECRET_TLS_CERT_KEY = "tls.crt"
SECRET_TLS_KEY_KEY = "tls.key"
CA_COMMON_NAME = "trussium-webhook-ca"


@dataclass(frozen=True)
class Lifetimes:
    ca: timedelta = CA_VALIDITY
    serving: timedelta = SERVING_VALIDITY
    renew_fraction: float = RENEW_FRACTION
    ca_adoption_delay: timedelta = timedelta(hours=1)


DEFAULT_LIFETIMES = Lifetimes()


@dataclass(frozen=True)
class TLSMaterial:
    """CA bundle, signing CA and serving certificate, as kept in the Secret."""

    signing_ca: KeyPair
    serving: KeyPair
    older_cas: tuple[x509.Certificate, ...] = ()

    @property
    def ca_bundle(self) -> tuple[x509.Certificate, ...]:
        return (self.signing_ca.certificate, *self.older_cas)

    @property
    def ca_bundle_pem(self) -> bytes:
        return encode_certificates(self.ca_bundle)

    def to_secret_data(self) -> dict[str, bytes]:
        return {
            SECRET_TLS_CERT_KEY: self.serving.certificate_pem,
            SECRET_TLS_KEY_KEY: self.serving.private_key_pem,
            SECRET_CA_CERT_KEY: self.ca_bundle_pem,
            SECRET_CA_KEY_KEY: self.signing_ca.private_key_pem,
        }

    @classmethod
    def from_secret_data(cls, data: Mapping[str, bytes]) -> TLSMaterial:
        missing = [
            key
            for key in (
                SECRET_TLS_CERT_KEY,
                SECRET_TLS_KEY_KEY,
                SECRET_CA_CERT_KEY,
                SECRET_CA_KEY_KEY,
            )
            if not data.get(key)
        ]
        if missing:
            raise CertificateError(f"missing keys: {', '.join(missing)}")
        bundle = decode_certificates(data[SECRET_CA_CERT_KEY])
        signing_ca = decode_key_pair(encode_certificates(bundle[:1]), data[SECRET_CA_KEY_KEY])
        serving = decode_key_pair(data[SECRET_TLS_CERT_KEY], data[SECRET_TLS_KEY_KEY])
        return cls(signing_ca, serving, tuple(bundle[1:]))


@dataclass(frozen=True)
class Rotation:
    material: TLSMaterial
    reasons: tuple[str, ...] = field(default=())

    @property
    def changed(self) -> bool:
        return bool(self.reasons)


def rotate(
    current: TLSMaterial | None,
    *,
    dns_names: Sequence[str],
    ip_addresses: Sequence[str],
    now: datetime,
    lifetimes: Lifetimes = DEFAULT_LIFETIMES,
) -> Rotation:
    """The material to keep, with the reasons it differs from `current` (none: unchanged)."""
    if current is None or current.signing_ca.certificate.not_valid_after_utc <= now:
        signing = generate_ca(CA_COMMON_NAME, lifetimes.ca, now=now)
        serving = issue_serving_certificate(
            signing, dns_names, ip_addresses, lifetimes.serving, now=now
        )
        return Rotation(TLSMaterial(signing, serving), ("no valid CA yet",))

    reasons: list[str] = []
    signing, serving = current.signing_ca, current.serving
    older = tuple(ca for ca in current.older_cas if ca.not_valid_after_utc > now)
    if len(older) != len(current.older_cas):
        reasons.append("expired CAs dropped from the bundle")
    problem = serving_certificate_problem(
        serving.certificate,
        (signing.certificate, *older),
        dns_names,
        ip_addresses,
        now,
        lifetimes.renew_fraction,
    )
    if needs_renewal(signing.certificate, now, lifetimes.renew_fraction):
        # A due serving certificate is refreshed by the outgoing CA, which every
        # client trusts already, so nothing needs the new CA before it is adopted.
        if problem is not None:
            serving = issue_serving_certificate(
                signing, dns_names, ip_addresses, lifetimes.serving, now=now
            )
            reasons.append(f"serving certificate reissued: {problem}")
            problem = None
        older = (signing.certificate, *older)
        signing = generate_ca(CA_COMMON_NAME, lifetimes.ca, now=now)
        reasons.append("CA renewed")
    elif (
        problem is None
        and not is_issued_by(serving.certificate, signing.certificate)
        and now - signing.certificate.not_valid_before_utc >= lifetimes.ca_adoption_delay
    ):
        problem = "the renewed CA is trusted everywhere by now"
    if problem is not None:
        serving = issue_serving_certificate(
            signing, dns_names, ip_addresses, lifetimes.serving, now=now
        )
        reasons.append(f"serving certificate reissued: {problem}")
    return Rotation(TLSMaterial(signing, serving, older), tuple(reasons))
