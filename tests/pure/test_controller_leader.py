"""Leader election decisions (client-go's rules), without a cluster."""

from datetime import UTC, datetime

from trussium_operator.controller.machinery.leader import (
    LeaseRecord,
    can_take,
    claimed_spec,
    released_spec,
)

NOW = datetime(2026, 11, 29, 8, 0, 0, 123456, tzinfo=UTC)


def record(holder: str, duration: int = 15) -> LeaseRecord:
    return LeaseRecord(holder=holder, duration=duration, renew_time=None, transitions=0)


def test_a_lease_held_by_another_is_taken_only_after_its_duration_unrenewed() -> None:
    held = record("other")
    assert not can_take(held, "me", observed_at=100.0, now=114.9)
    assert can_take(held, "me", observed_at=100.0, now=115.0)


def test_a_released_or_own_lease_is_taken_at_once() -> None:
    assert can_take(record(""), "me", observed_at=100.0, now=100.0)
    assert can_take(record("me"), "me", observed_at=100.0, now=100.0)


def test_claiming_a_new_lease_starts_at_zero_transitions() -> None:
    spec = claimed_spec(None, "me", 15, NOW)
    assert spec == {
        "holderIdentity": "me",
        "leaseDurationSeconds": 15,
        "acquireTime": "2026-11-29T08:00:00.123456Z",
        "renewTime": "2026-11-29T08:00:00.123456Z",
        "leaseTransitions": 0,
    }


def test_renewing_keeps_acquire_time_and_transitions() -> None:
    previous = {
        "holderIdentity": "me",
        "acquireTime": "2026-11-29T07:00:00.000000Z",
        "leaseTransitions": 3,
        "leaseDurationSeconds": 15,
    }
    spec = claimed_spec(previous, "me", 15, NOW)
    assert spec["acquireTime"] == "2026-11-29T07:00:00.000000Z"
    assert spec["leaseTransitions"] == 3
    assert spec["renewTime"] == "2026-11-29T08:00:00.123456Z"


def test_taking_over_counts_a_transition() -> None:
    previous = {"holderIdentity": "", "leaseTransitions": 3, "leaseDurationSeconds": 1}
    spec = claimed_spec(previous, "me", 15, NOW)
    assert spec["leaseTransitions"] == 4
    assert spec["holderIdentity"] == "me"
    assert spec["leaseDurationSeconds"] == 15


def test_release_empties_the_holder_and_shortens_the_lease() -> None:
    spec = released_spec({"holderIdentity": "me", "leaseDurationSeconds": 15}, NOW)
    assert spec["holderIdentity"] == ""
    assert spec["leaseDurationSeconds"] == 1
