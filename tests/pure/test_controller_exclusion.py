"""The gate on the Go operator's leader Lease (controller/exclusion.py), with a fake API."""

import asyncio
from typing import Any

import pytest

from trussium_operator.controller.exclusion import ForeignLeaseGate
from trussium_operator.controller.machinery.kube import ApiError, Kube
from trussium_operator.controller.machinery.names import NamespacedName

LEASE = NamespacedName("trussium-operator-system", "d4fd4c09.trussium.io")


class FakeKube:
    """Answers every GET with the next scripted answer (a Lease dict or an ApiError)."""

    def __init__(self, *answers: dict[str, Any] | Exception) -> None:
        self.answers = list(answers)
        self.paths: list[str] = []

    async def request(self, method: str, path: str, **_: Any) -> dict[str, Any]:
        assert method == "GET"
        self.paths.append(path)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def lease(holder: str, duration: int = 15, renewed: str = "t0") -> dict[str, Any]:
    spec = {"holderIdentity": holder, "leaseDurationSeconds": duration, "renewTime": renewed}
    return {"spec": spec}


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def gate(kube: FakeKube, clock: Clock) -> ForeignLeaseGate:
    fake: Kube = kube  # type: ignore[assignment]
    return ForeignLeaseGate(fake, LEASE, "trussium-0", period=1.0, clock=clock)


def check(g: ForeignLeaseGate) -> None:
    asyncio.run(g.check())


def test_closed_until_first_checked_then_open_without_a_lease() -> None:
    kube = FakeKube(ApiError(404, "NotFound", ""))
    g = gate(kube, Clock())
    assert not g.is_open()
    check(g)
    assert g.is_open()
    assert kube.paths == [
        "/apis/coordination.k8s.io/v1/namespaces/trussium-operator-system/leases/d4fd4c09.trussium.io"
    ]


def test_a_held_lease_closes_until_unchanged_for_its_duration_on_our_clock() -> None:
    clock = Clock()
    held = lease("go-0_abc", duration=15)
    kube = FakeKube(
        held,
        held,
        lease("go-0_abc", 15, "t1"),
        lease("go-0_abc", 15, "t1"),
        lease("go-0_abc", 15, "t1"),
    )
    g = gate(kube, clock)
    check(g)
    assert not g.is_open()
    clock.now += 14.9
    check(g)
    assert not g.is_open(), "unchanged for less than its duration"
    clock.now += 5
    check(g)
    assert not g.is_open(), "renewed: fresh again from when we saw the renewal"
    clock.now += 14.9
    check(g)
    assert not g.is_open()
    clock.now += 0.1
    check(g)
    assert g.is_open(), "expired: proceed without a restart"


def test_a_released_lease_opens_at_once_and_a_returning_holder_closes_again() -> None:
    kube = FakeKube(lease(""), lease("go-1_def"))
    g = gate(kube, Clock())
    check(g)
    assert g.is_open()
    check(g)
    assert not g.is_open()


@pytest.mark.parametrize(
    "problem", [ApiError(403, "Forbidden", "no"), ApiError(500, "InternalError", ""), OSError()]
)
def test_an_unreadable_lease_keeps_the_gate_as_it_was(problem: Exception) -> None:
    kube = FakeKube(problem, ApiError(404, "NotFound", ""), problem)
    g = gate(kube, Clock())
    check(g)
    assert not g.is_open(), "unsure at start: write nothing"
    check(g)
    assert g.is_open()
    check(g)
    assert g.is_open()


def test_waiting_is_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    held = lease("go-0_abc")
    g = gate(FakeKube(held, held, held, lease("go-0_xyz")), Clock())
    for _ in range(4):
        check(g)
    waits = [r for r in caplog.records if "holds its leader lease" in r.getMessage()]
    assert len(waits) == 1
