"""The self-managed Secrets' renewal decisions, with a clock passed in."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from trussium_operator.certs.authority import CertificateError, KeyPair, is_issued_by
from trussium_operator.certs.rotation import (
    DEFAULT_LIFETIMES,
    Authority,
    Lifetimes,
    Rotation,
    rotate,
    serving_from_secret_data,
    serving_secret_data,
)

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
DNS = ["trussium-webhook.ops.svc"]
IPS = ["127.0.0.1"]
DAY = timedelta(days=1)
HOUR = timedelta(hours=1)


def again(previous: Rotation, now: datetime, lifetimes: Lifetimes = DEFAULT_LIFETIMES) -> Rotation:
    return rotate(
        previous.authority,
        previous.serving,
        dns_names=DNS,
        ip_addresses=IPS,
        now=now,
        lifetimes=lifetimes,
    )


def first() -> Rotation:
    rotation = rotate(None, None, dns_names=DNS, ip_addresses=IPS, now=NOW)
    assert rotation.changed
    return rotation


def test_nothing_yet_creates_a_ca_and_a_serving_certificate_it_signed() -> None:
    rotation = first()
    assert is_issued_by(rotation.serving.certificate, rotation.authority.signing_ca.certificate)
    assert rotation.authority.older_cas == ()


def test_current_material_is_kept_unchanged() -> None:
    rotation = first()
    later = again(rotation, NOW + 200 * DAY)
    assert not later.changed
    assert (later.authority, later.serving) == (rotation.authority, rotation.serving)


def test_a_missing_serving_certificate_is_issued_by_the_existing_ca() -> None:
    rotation = first()
    later = rotate(rotation.authority, None, dns_names=DNS, ip_addresses=IPS, now=NOW)
    assert later.authority == rotation.authority
    assert is_issued_by(later.serving.certificate, rotation.authority.signing_ca.certificate)


def test_serving_certificate_is_reissued_by_the_same_ca_when_a_third_remains() -> None:
    rotation = first()
    later = again(rotation, NOW + 250 * DAY)
    assert later.changed
    assert later.authority == rotation.authority
    assert later.serving != rotation.serving
    assert later.serving.certificate.not_valid_after_utc == NOW + 615 * DAY


def test_added_names_reissue_the_serving_certificate_but_removed_ones_do_not() -> None:
    rotation = first()
    later = rotate(
        rotation.authority,
        rotation.serving,
        dns_names=[*DNS, "extra.example"],
        ip_addresses=[],
        now=NOW,
    )
    assert "lacks" in " ".join(later.reasons)
    assert later.authority == rotation.authority
    # An old replica still wanting fewer names accepts the new certificate.
    assert not rotate(
        later.authority, later.serving, dns_names=DNS, ip_addresses=[], now=NOW
    ).changed


def test_a_renewed_ca_is_trusted_first_signs_later_and_the_old_one_leaves_after() -> None:
    rotation = first()
    old_ca = rotation.authority.signing_ca.certificate
    renewal_time = NOW + 1300 * DAY  # less than a third of five years left
    renewed = again(rotation, renewal_time)
    new_ca = renewed.authority.signing_ca.certificate
    assert "CA renewed" in renewed.reasons
    # Both CAs are trusted; the due serving certificate was refreshed by the old CA,
    # which every API server already trusts.
    assert renewed.authority.bundle == (new_ca, old_ca)
    assert renewed.serving != rotation.serving
    assert is_issued_by(renewed.serving.certificate, old_ca)

    assert not again(renewed, renewal_time + 30 * timedelta(minutes=1)).changed

    adopted = again(renewed, renewal_time + HOUR)
    assert is_issued_by(adopted.serving.certificate, new_ca)
    # Pods may still serve the old CA's certificate until the Secret reaches them.
    assert adopted.authority.bundle == (new_ca, old_ca)
    assert not again(adopted, renewal_time + HOUR + 50 * timedelta(minutes=1)).changed

    settled = again(adopted, renewal_time + 2 * HOUR + timedelta(minutes=5))
    assert settled.reasons == ("CAs no serving certificate needs dropped from the bundle",)
    assert settled.authority.bundle == (new_ca,)
    assert settled.serving == adopted.serving
    assert not again(settled, renewal_time + 3 * HOUR).changed


def test_a_ca_that_signed_the_served_certificate_stays_however_long_ago() -> None:
    rotation = first()
    renewed = again(rotation, NOW + 1300 * DAY)
    # The serving certificate is not due, and the new CA is not adopted yet: keep both.
    lifetimes = Lifetimes(ca_adoption_delay=1000 * DAY)
    later = again(renewed, NOW + 1400 * DAY, lifetimes)
    assert len(later.authority.bundle) == 2
    assert is_issued_by(later.serving.certificate, rotation.authority.signing_ca.certificate)


def test_an_expired_signing_ca_starts_over() -> None:
    lifetimes = Lifetimes(ca=30 * DAY, serving=10 * DAY)
    rotation = rotate(None, None, dns_names=DNS, ip_addresses=IPS, now=NOW, lifetimes=lifetimes)
    later = again(rotation, NOW + 31 * DAY)
    assert later.authority.signing_ca != rotation.authority.signing_ca
    assert later.authority.older_cas == ()


def test_secret_data_round_trip_and_the_serving_secret_has_no_ca_key() -> None:
    rotation = again(first(), NOW + 1300 * DAY)  # two CAs in the bundle
    ca_data = rotation.authority.to_secret_data()
    assert sorted(ca_data) == ["ca.crt", "tls.crt", "tls.key"]
    assert Authority.from_secret_data(ca_data) == rotation.authority
    serving_data = serving_secret_data(rotation.serving, rotation.authority)
    assert sorted(serving_data) == ["ca.crt", "tls.crt", "tls.key"]
    assert serving_data["ca.crt"] == ca_data["ca.crt"]
    assert ca_data["tls.key"] not in serving_data.values()
    assert serving_from_secret_data(serving_data) == rotation.serving


def test_the_ca_of_a_serving_secret_from_before_adr_0029_is_adopted() -> None:
    rotation = first()
    legacy = {
        **serving_secret_data(rotation.serving, rotation.authority),
        "ca.key": rotation.authority.signing_ca.private_key_pem,
    }
    assert Authority.from_legacy_secret_data(legacy) == rotation.authority


def test_a_ca_whose_key_was_exposed_is_renewed_at_once_and_leaves_as_a_renewed_one() -> None:
    """The CA of the layout before ADR 0029, its key readable by the webhook pods: renewed
    on the first pass, replaced like a due CA, and not renewed again after it."""
    legacy = first()
    exposed_ca = legacy.authority.signing_ca.certificate
    upgrade = NOW + 30 * DAY
    renewed = rotate(
        legacy.authority,
        legacy.serving,
        dns_names=DNS,
        ip_addresses=IPS,
        now=upgrade,
        exposed=True,
    )
    new_ca = renewed.authority.signing_ca.certificate
    assert renewed.reasons == ("CA renewed: its key was in the serving Secret",)
    assert renewed.authority.bundle == (new_ca, exposed_ca)
    assert renewed.serving == legacy.serving, "still served, still trusted"

    # The next passes (this controller's, a restart's) read the CA Secret: not exposed.
    assert not again(renewed, upgrade + 30 * timedelta(minutes=1)).changed
    adopted = again(renewed, upgrade + HOUR)
    assert is_issued_by(adopted.serving.certificate, new_ca)
    assert adopted.authority.bundle == (new_ca, exposed_ca)
    settled = again(adopted, upgrade + 2 * HOUR + timedelta(minutes=5))
    assert settled.authority.bundle == (new_ca,)
    assert not again(settled, upgrade + 200 * DAY).changed


def test_incomplete_or_mismatched_secret_data_is_refused_with_the_reason() -> None:
    data = first().authority.to_secret_data()
    with pytest.raises(CertificateError, match=r"missing keys: tls\.key"):
        Authority.from_secret_data({**data, "tls.key": b""})
    other: KeyPair = first().serving
    with pytest.raises(CertificateError, match="does not belong"):
        Authority.from_secret_data({**data, "tls.key": other.private_key_pem})
