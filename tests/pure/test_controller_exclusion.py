"""The gate on the Go operator's leader Lease (controller/migration/exclusion.py), with a fake API.

kube-apiserver proves the behaviour for both install layouts and a refused list
(tests/apiserver/test_go_operator_lease.py); here, the edge cases: freshness on our
clock, several Leases, and how a failing list is reported."""

import asyncio
import logging
from typing import Any

import pytest
from prometheus_client import REGISTRY

from trussium_operator.controller.machinery.kube import ApiError, Kube, TransportError
from trussium_operator.controller.migration.exclusion import ForeignLeaseGate, LeaseSearch

KUSTOMIZE = "trussium-operator-system"
HELM = "platform-ops"
EVERYWHERE = LeaseSearch()
NAME = "d4fd4c09.trussium.io"
FORBIDDEN = ApiError(403, "Forbidden", 'User "x" cannot list resource "leases"')


class FakeKube:
    """Answers every GET with the next scripted answer (a list of Leases or an error)."""

    def __init__(self, *answers: list[dict[str, Any]] | Exception) -> None:
        self.answers = list(answers)
        self.requests: list[tuple[str, dict[str, Any]]] = []

    async def request(
        self, method: str, path: str, query: dict[str, Any] | None = None, **_: Any
    ) -> dict[str, Any]:
        assert method == "GET"
        self.requests.append((path, query or {}))
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return {"kind": "LeaseList", "items": answer}


def lease(
    holder: str, duration: int = 15, renewed: str = "t0", namespace: str = KUSTOMIZE
) -> dict[str, Any]:
    spec = {"holderIdentity": holder, "leaseDurationSeconds": duration, "renewTime": renewed}
    return {"metadata": {"name": NAME, "namespace": namespace}, "spec": spec}


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def gate(kube: FakeKube, clock: Clock, search: LeaseSearch = EVERYWHERE) -> ForeignLeaseGate:
    fake: Kube = kube  # type: ignore[assignment]
    return ForeignLeaseGate(fake, search, "trussium-0", period=1.0, clock=clock)


def check(g: ForeignLeaseGate) -> None:
    asyncio.run(g.check())


def held_metric(namespace: str) -> float | None:
    return REGISTRY.get_sample_value(
        "trussium_foreign_lease_held", {"lease": f"{namespace}/{NAME}"}
    )


def unreadable_metric() -> float | None:
    return REGISTRY.get_sample_value("trussium_foreign_lease_unreadable")


def test_closed_until_first_checked_then_open_without_a_lease() -> None:
    kube = FakeKube([])
    g = gate(kube, Clock())
    assert not g.is_open()
    assert g.not_ready() == f"the Go operator's leader Lease */{NAME} not checked yet"
    check(g)
    assert g.is_open()
    assert g.not_ready() == ""
    assert kube.requests == [
        ("/apis/coordination.k8s.io/v1/leases", {"fieldSelector": f"metadata.name={NAME}"})
    ]


def test_pinned_to_a_namespace_it_lists_only_there() -> None:
    kube = FakeKube([])
    check(gate(kube, Clock(), LeaseSearch(NAME, HELM)))
    assert kube.requests == [
        (
            f"/apis/coordination.k8s.io/v1/namespaces/{HELM}/leases",
            {"fieldSelector": f"metadata.name={NAME}"},
        )
    ]


def test_a_held_lease_closes_until_unchanged_for_its_duration_on_our_clock() -> None:
    clock = Clock()
    held = lease("go-0_abc", duration=15)
    renewed = lease("go-0_abc", 15, "t1")
    g = gate(FakeKube([held], [held], [renewed], [renewed], [renewed]), clock)
    check(g)
    assert not g.is_open()
    assert g.not_ready() == (
        "waiting for the Go operator's leader Lease to expire or be released: "
        f"{KUSTOMIZE}/{NAME} held by go-0_abc"
    )
    assert held_metric(KUSTOMIZE) == 1
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
    assert held_metric(KUSTOMIZE) == 0


def test_a_released_lease_opens_at_once_and_a_returning_holder_closes_again() -> None:
    g = gate(FakeKube([lease("")], [lease("go-1_def")]), Clock())
    check(g)
    assert g.is_open()
    check(g)
    assert not g.is_open()


def test_any_of_several_leases_held_keeps_the_gate_closed() -> None:
    """Two Go installs (its kustomize bundle and a Helm release): both must be gone."""
    clock = Clock()
    kustomize, helm = lease("go-0_abc"), lease("go-1_def", duration=5, namespace=HELM)
    g = gate(FakeKube([kustomize, helm], [kustomize, helm], [helm], []), clock)
    check(g)
    assert not g.is_open()
    assert f"{HELM}/{NAME} held by go-1_def, {KUSTOMIZE}/{NAME} held by go-0_abc" in g.not_ready()
    assert (held_metric(KUSTOMIZE), held_metric(HELM)) == (1, 1)
    clock.now += 5
    check(g)
    assert not g.is_open(), "the Helm release's Lease expired, the bundle's is fresh"
    assert (held_metric(KUSTOMIZE), held_metric(HELM)) == (1, 0)
    check(g)
    assert g.is_open(), "the bundle's Lease deleted; the other one expired"
    assert held_metric(KUSTOMIZE) is None, "the series of a Lease gone goes with it"
    check(g)
    assert g.is_open()
    assert held_metric(HELM) is None


@pytest.mark.parametrize(
    "problem", [FORBIDDEN, ApiError(500, "InternalError", ""), TransportError("OSError")]
)
def test_an_unreadable_lease_keeps_the_gate_as_it_was_and_says_so(problem: Exception) -> None:
    g = gate(FakeKube(problem, [], problem, []), Clock())
    check(g)
    assert not g.is_open(), "unsure at start: write nothing"
    assert g.not_ready().startswith("cannot read the Go operator's leader Lease: ")
    assert unreadable_metric() == 1
    check(g)
    assert g.is_open()
    assert (g.not_ready(), unreadable_metric()) == ("", 0)
    check(g)
    assert g.is_open(), "an open gate stays open"
    assert g.not_ready() != "", "but readiness says the Lease cannot be read"
    check(g)
    assert (g.not_ready(), unreadable_metric()) == ("", 0)


def test_a_refusal_names_the_permission_it_lacks() -> None:
    g = gate(FakeKube(FORBIDDEN, FORBIDDEN), Clock(), LeaseSearch(NAME, HELM))
    check(g)
    assert g.not_ready() == (
        "cannot read the Go operator's leader Lease: 403 Forbidden: needs verb list on "
        f'leases.coordination.k8s.io (resourceNames {NAME}) in the namespace "{HELM}"'
    )
    assert "cannot list" not in g.not_ready(), "the API server's own message is not repeated"
    g = gate(FakeKube(FORBIDDEN), Clock())
    check(g)
    assert g.not_ready().endswith(f"(resourceNames {NAME}) at the cluster scope")


def test_a_failing_list_is_logged_with_backoff_until_it_succeeds(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, "controller.migration.exclusion")
    clock = Clock()
    failures = 400
    g = gate(FakeKube(*[FORBIDDEN] * failures, [], FORBIDDEN), clock)
    logged_at = []
    for second in range(failures):
        clock.now = 100.0 + second
        caplog.clear()
        check(g)
        logged_at += [second for r in caplog.records if "cannot read" in r.getMessage()]
    assert logged_at == [0, 30, 90, 210], "at once, then after 30 s doubling (capped at 300 s)"
    caplog.clear()
    check(g)
    assert [r.getMessage() for r in caplog.records] == [
        "the Go operator's leader lease can be read again",
        "no Go operator leader lease is held: reconciling",
    ]
    caplog.clear()
    check(g)
    assert [r.levelname for r in caplog.records if "cannot read" in r.getMessage()] == ["ERROR"]


def test_waiting_is_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    held = lease("go-0_abc")
    g = gate(FakeKube([held], [held], [held], [lease("go-0_xyz")]), Clock())
    for _ in range(4):
        check(g)
    waits = [r for r in caplog.records if "holds its leader lease" in r.getMessage()]
    assert len(waits) == 1
