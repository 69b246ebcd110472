"""Whose an object under a managed name is (docs/contract.md section 4, "Ownership")."""

from typing import Any

import pytest

from trussium_operator.common.ownership import Claim, conflict_message, ownership

UID = "3f0c8a2e-runtime"
LABELS = {
    "app.kubernetes.io/name": "trussium",
    "app.kubernetes.io/instance": "squat",
    "app.kubernetes.io/component": "runtime",
    "app.kubernetes.io/managed-by": "trussium-operator",
}


def reference(kind: str, name: str, uid: str, controller: bool = True) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": kind, "name": name, "uid": uid, "controller": controller}


def live(labels: dict[str, str] | None = None, *references: dict[str, Any]) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "squat", "namespace": "team"}
    if labels is not None:
        meta["labels"] = labels
    if references:
        meta["ownerReferences"] = list(references)
    return {"metadata": meta}


@pytest.mark.parametrize(
    ("obj", "claim"),
    [
        pytest.param(None, Claim.ABSENT, id="nothing under the name"),
        pytest.param(
            live(LABELS, reference("TrussiumRuntime", "squat", UID)),
            Claim.CONTROLLED,
            id="controlled by the runtime",
        ),
        pytest.param(
            live(None, reference("TrussiumRuntime", "squat", UID)),
            Claim.CONTROLLED,
            id="controlled by the runtime, labels removed by hand",
        ),
        pytest.param(live(LABELS), Claim.ORPHANED, id="orphan with the runtime's labels"),
        pytest.param(
            live(LABELS, reference("ConfigMap", "other", "x", controller=False)),
            Claim.ORPHANED,
            id="orphan with the runtime's labels and a plain owner",
        ),
        pytest.param(live(None), Claim.FOREIGN, id="no labels, no owner"),
        pytest.param(live({"app": "billing"}), Claim.FOREIGN, id="someone else's labels"),
        pytest.param(
            live(LABELS | {"app.kubernetes.io/instance": "other"}),
            Claim.FOREIGN,
            id="orphan of another runtime",
        ),
        pytest.param(
            live(LABELS, reference("Deployment", "billing", "d-uid")),
            Claim.FOREIGN,
            id="the runtime's labels under another controller",
        ),
        pytest.param(
            live(LABELS, reference("TrussiumRuntime", "squat", "earlier-uid")),
            Claim.FOREIGN,
            id="controlled by an earlier runtime of that name",
        ),
    ],
)
def test_claim(obj: dict[str, Any] | None, claim: Claim) -> None:
    assert ownership(obj, "squat", UID).claim is claim


def test_only_someone_elses_object_is_off_limits() -> None:
    assert [claim for claim in Claim if not claim.writable] == [Claim.FOREIGN]


def test_a_conflict_names_the_kind_the_name_and_who_controls_it() -> None:
    found = ownership(live(None, reference("Deployment", "billing", "d-uid")), "squat", UID)
    message = conflict_message("Service", "squat", found)
    assert message.startswith('Service "squat" already exists and is not this runtime\'s')
    assert 'controlled by Deployment "billing"' in message


def test_a_conflict_with_no_controller_says_so() -> None:
    found = ownership(live({"app": "billing"}), "squat", UID)
    assert "no controller" in conflict_message("NetworkPolicy", "squat", found)


def test_an_earlier_runtime_of_the_same_name_is_named_as_such() -> None:
    found = ownership(live(None, reference("TrussiumRuntime", "squat", "old")), "squat", UID)
    assert "an earlier runtime of that name" in found.holder
