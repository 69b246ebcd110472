"""The self-managed Secret's renewal decisions, with a clock passed in."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from trussium_operator.certs.authority import CertificateError, is_issued_by
from trussium_operator.certs.rotation import Lifetimes, TLSMaterial, rotate

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
DNS = ["trussium-webhook.ops.svc"]
IPS = ["127.0.0.1"]
DAY = timedelta(days=1)


def first_material() -> TLSMaterial:
    rotation = rotate(None, dns_names=DNS, ip_addresses=IPS, now=NOW)
    assert rotation.changed
    return rotation.material


def test_nothing_yet_creates_a_ca_and_a_serving_certificate_it_signed() -> None:
    material = first_material()
    assert is_issued_by(material.serving.certificate, material.signing_ca.certificate)
    assert material.older_cas == ()


def test_current_material_is_kept_unchanged() -> None:
    material = first_material()
    later = rotate(material, dns_names=DNS, ip_addresses=IPS, now=NOW + 200 * DAY)
    assert not later.changed
    assert later.material == material


def test_serving_certificate_is_reissued_by_the_same_ca_when_a_third_remains() -> None:
    material = first_material()
    later = rotate(material, dns_names=DNS, ip_addresses=IPS, now=NOW + 250 * DAY)
    assert later.changed
    assert later.material.signing_ca == material.signing_ca
    assert later.material.serving != material.serving
    assert later.material.serving.certificate.not_valid_after_utc == NOW + 615 * DAY


def test_added_names_reissue_the_serving_certificate_but_removed_ones_do_not() -> None:
    material = first_material()
    later = rotate(material, dns_names=[*DNS, "extra.example"], ip_addresses=[], now=NOW)
    assert "lacks" in " ".join(later.reasons)
    assert later.material.signing_ca == material.signing_ca
    # An old replica still wanting fewer names accepts the new certificate.
    assert not rotate(later.material, dns_names=DNS, ip_addresses=[], now=NOW).changed


def test_ca_renewal_trusts_the_new_ca_before_anything_is_signed_by_it() -> None:
    material = first_material()
    renewal_time = NOW + 1300 * DAY  # less than a third of five years left
    renewed = rotate(material, dns_names=DNS, ip_addresses=IPS, now=renewal_time)
    new = renewed.material
    assert "CA renewed" in renewed.reasons
    assert new.signing_ca != material.signing_ca
    # Both CAs are in the bundle; the expired serving certificate was refreshed
    # by the old CA, which every API server already trusts.
    assert new.ca_bundle == (new.signing_ca.certificate, material.signing_ca.certificate)
    assert new.serving != material.serving
    assert is_issued_by(new.serving.certificate, material.signing_ca.certificate)

    soon = rotate(new, dns_names=DNS, ip_addresses=IPS, now=renewal_time + timedelta(minutes=30))
    assert not soon.changed

    adopted = rotate(new, dns_names=DNS, ip_addresses=IPS, now=renewal_time + timedelta(hours=1))
    assert adopted.changed
    assert is_issued_by(adopted.material.serving.certificate, new.signing_ca.certificate)
    assert adopted.material.ca_bundle == new.ca_bundle


def test_an_expired_old_ca_leaves_the_bundle() -> None:
    material = first_material()
    renewal_time = NOW + 1300 * DAY
    renewed = rotate(material, dns_names=DNS, ip_addresses=IPS, now=renewal_time).material
    after_expiry = NOW + 5 * 365 * DAY + DAY
    later = rotate(renewed, dns_names=DNS, ip_addresses=IPS, now=after_expiry).material
    assert later.ca_bundle == (renewed.signing_ca.certificate,)
    assert is_issued_by(later.serving.certificate, renewed.signing_ca.certificate)


def test_an_expired_signing_ca_starts_over() -> None:
    lifetimes = Lifetimes(ca=30 * DAY, serving=10 * DAY)
    material = rotate(None, dns_names=DNS, ip_addresses=IPS, now=NOW, lifetimes=lifetimes).material
    later = rotate(material, dns_names=DNS, ip_addresses=IPS, now=NOW + 31 * DAY)
    assert later.material.signing_ca != material.signing_ca
    assert later.material.older_cas == ()


def test_secret_data_round_trip() -> None:
    material = first_material()
    data = material.to_secret_data()
    assert sorted(data) == ["ca.crt", "ca.key", "tls.crt", "tls.key"]
    assert TLSMaterial.from_secret_data(data) == material


def test_incomplete_or_mismatched_secret_data_is_refused_with_the_reason() -> None:
    data = first_material().to_secret_data()
    with pytest.raises(CertificateError, match=r"missing keys: ca\.key"):
        TLSMaterial.from_secret_data({**data, "ca.key": b""})
    with pytest.raises(CertificateError, match="does not belong"):
        TLSMaterial.from_secret_data({**data, "ca.key": data["tls.key"]})
