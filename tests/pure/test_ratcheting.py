"""The one ratcheting policy: which rules a stored runtime may break and still be reconciled.

Each tolerated rule is shown to be tolerated, with the render the Go operator
made; each family of enforced rules (the Go CRD's, what the API server
refuses in the rendered objects) is shown to freeze the runtime; new runtimes
still meet every rule; and an UPDATE's warning says which of the two applies.
"""

import copy
from typing import Any

import pytest

from tests.pure.test_validation import VALID, with_spec
from tests.support.stricter_rules import APPARMOR, FROZEN, SECCOMP_CONTAINER, SECCOMP_POD, TOLERATED
from trussium_operator.common.events import decide_events
from trussium_operator.common.ratcheting import (
    CONSEQUENCES,
    TolerableRule,
    consequence,
    split_stored,
    tolerated,
)
from trussium_operator.common.status import Outcome, compute_status
from trussium_operator.common.validation import validate_runtime
from trussium_operator.controller.runtime.kinds import render_managed_objects


@pytest.mark.parametrize("rule", list(TolerableRule))
def test_each_tolerated_rule_leaves_a_stored_runtime_reconciled(rule: TolerableRule) -> None:
    assert not validate_runtime(TOLERATED[rule]).allowed, "a new runtime still meets every rule"
    result = validate_runtime(TOLERATED[rule], stored=True)
    freezing, warnings = split_stored(result.errors)
    assert freezing == ()
    assert [w.rule for w in warnings] == [rule]
    assert result.runtime is not None, "rendered from the stored spec"
    assert consequence(warnings[0]) == CONSEQUENCES[rule]


def rendered(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    runtime = validate_runtime(obj, stored=True).runtime
    assert runtime is not None
    return {o["kind"]: o for o in render_managed_objects(runtime)}


def test_tolerated_specs_render_what_the_go_operator_rendered() -> None:
    objects = rendered(TOLERATED[TolerableRule.RESERVED_POD_LABEL])
    labels = objects["Deployment"]["spec"]["template"]["metadata"]["labels"]
    assert labels["app.kubernetes.io/name"] == "trussium", "the reserved label dropped"
    assert labels["team"] == "ml"

    objects = rendered(TOLERATED[TolerableRule.SECURITY_PROFILE_ANNOTATION])
    annotations = objects["Deployment"]["spec"]["template"]["metadata"]["annotations"]
    assert annotations[f"{APPARMOR}trussium"] == "unconfined", "copied as the Go operator did"

    objects = rendered(TOLERATED[TolerableRule.BASE_URL_NOT_HTTP])
    assert objects["ConfigMap"]["data"]["TRUSSIUM_PROVIDER__BASE_URL"] == "localhost:11434"

    objects = rendered(TOLERATED[TolerableRule.AUTOSCALING_WITHOUT_CPU_REQUEST])
    autoscaler = objects["HorizontalPodAutoscaler"]["spec"]
    assert (autoscaler["minReplicas"], autoscaler["maxReplicas"]) == (1, 3)
    assert "resources" not in objects["Deployment"]["spec"]["template"]["spec"]["containers"][0]

    obj = TOLERATED[TolerableRule.TOO_MANY_ENTRIES]
    objects = rendered(obj)
    tolerations = objects["Deployment"]["spec"]["template"]["spec"]["tolerations"]
    assert tolerations == obj["spec"]["scheduling"]["tolerations"], "every one, not the first 64"


def test_a_checksum_annotation_is_still_the_operators() -> None:
    obj = with_spec(podMetadata={"annotations": {"runtime.trussium.io/config-checksum": "x"}})
    objects = rendered(obj)
    checksum = objects["Deployment"]["spec"]["template"]["metadata"]["annotations"]
    assert checksum["runtime.trussium.io/config-checksum"] != "x"


@pytest.mark.parametrize("case", list(FROZEN))
def test_enforced_rules_freeze_a_stored_runtime(case: str) -> None:
    obj, path = FROZEN[case]
    freezing, _ = split_stored(validate_runtime(obj).errors)
    assert path in [e.path for e in freezing]


@pytest.mark.parametrize(
    "annotation",
    [
        {SECCOMP_POD: "runtime/default"},
        {f"{SECCOMP_CONTAINER}trussium": "unconfined"},
        {f"{SECCOMP_CONTAINER}trussium": "localhost/profiles/strict.json"},
        {f"{APPARMOR}trussium": "localhost/k8s-runtime"},
        {f"{APPARMOR}trussium": "runtime/default"},
    ],
)
def test_security_annotations_the_api_server_accepts_are_tolerated(
    annotation: dict[str, str],
) -> None:
    errors = validate_runtime(with_spec(podMetadata={"annotations": annotation})).errors
    assert [e.rule for e in errors] == [TolerableRule.SECURITY_PROFILE_ANNOTATION]
    assert all(tolerated(e) for e in errors)


def test_one_enforced_rule_freezes_a_runtime_that_breaks_tolerated_ones_too() -> None:
    obj = copy.deepcopy(TOLERATED[TolerableRule.AUTOSCALING_WITHOUT_CPU_REQUEST])
    obj["spec"]["provider"]["baseURL"] = "localhost:11434"
    obj["spec"]["scheduling"]["tolerations"] = [{"key": "gpu", "operator": "Exist"}]
    freezing, warnings = split_stored(validate_runtime(obj).errors)
    assert [e.path for e in freezing] == ["spec.scheduling.tolerations[0].operator"]
    assert {w.rule for w in warnings} == {
        TolerableRule.AUTOSCALING_WITHOUT_CPU_REQUEST,
        TolerableRule.BASE_URL_NOT_HTTP,
    }


def update_of(obj: dict[str, Any]) -> tuple[str, ...]:
    """The warnings of an image bump of a stored `obj`."""
    new = copy.deepcopy(obj)
    new["spec"]["image"]["tag"] = "9.9.9"
    result = validate_runtime(new, obj)
    assert result.allowed, result.errors
    return result.warnings


def test_an_update_keeps_an_old_tolerated_violation_and_says_the_operator_acts_on_it() -> None:
    (kept,) = update_of(TOLERATED[TolerableRule.AUTOSCALING_WITHOUT_CPU_REQUEST])
    assert kept.endswith("(already present before this update, so not blocking it)")


def test_an_update_may_keep_a_collection_over_its_bound_but_not_grow_it() -> None:
    obj = TOLERATED[TolerableRule.TOO_MANY_ENTRIES]
    (kept,) = update_of(obj)
    assert kept == (
        "spec.scheduling.tolerations: must have at most 64 items, has 65 "
        "(already present before this update, so not blocking it)"
    )
    grown = copy.deepcopy(obj)
    grown["spec"]["scheduling"]["tolerations"].append({"key": "more", "operator": "Exists"})
    result = validate_runtime(grown, obj)
    assert [(e.path, e.message) for e in result.errors] == [
        ("spec.scheduling.tolerations", "must have at most 64 items, has 66")
    ]


def test_a_spec_change_to_a_frozen_runtime_must_fix_what_freezes_it() -> None:
    """The operator would ignore the change, so the webhook refuses it and says why."""
    frozen = FROZEN["toleration operator"][0]
    bump = copy.deepcopy(frozen)
    bump["spec"]["image"]["tag"] = "9.9.9"
    result = validate_runtime(bump, frozen)
    assert not result.allowed
    (error,) = result.errors
    assert error.path.startswith("spec.scheduling.tolerations")
    assert error.message.endswith("a change to its spec must fix this too)")


def test_a_metadata_edit_of_a_frozen_runtime_is_admitted_with_a_warning() -> None:
    frozen = FROZEN["toleration operator"][0]
    relabeled = copy.deepcopy(frozen)
    relabeled["metadata"].setdefault("labels", {})["team"] = "a"
    result = validate_runtime(relabeled, frozen)
    assert result.allowed, result.errors
    (warning,) = result.warnings
    assert warning.endswith("the operator does not reconcile this runtime until it is fixed)")


# --- what a reconciled runtime reports


def reconciled_status(obj: dict[str, Any], previous: dict[str, Any] | None = None) -> Any:
    result = validate_runtime({**obj, "status": previous}, stored=True)
    assert result.runtime is not None
    _, warnings = split_stored(result.errors)
    return compute_status(
        result.runtime,
        deployment=None,
        service=None,
        outcome=Outcome(),
        now="2026-01-01T00:00:00Z",
        warnings=warnings,
    )


def test_a_reconciled_runtime_reports_each_broken_rule_with_its_path() -> None:
    obj = copy.deepcopy(TOLERATED[TolerableRule.AUTOSCALING_WITHOUT_CPU_REQUEST])
    obj["spec"]["provider"]["baseURL"] = "https://user:s3cret@api.example.com/v1"
    status = reconciled_status(obj)
    found = {c["type"]: c for c in status["conditions"]}
    warned = found["ConfigurationWarnings"]
    assert (warned["status"], warned["reason"]) == ("True", "AcceptedWithWarnings")
    assert "spec.autoscaling.enabled: autoscaling needs" in warned["message"]
    assert "[AutoscalingWithoutCPURequest]" in warned["message"]
    assert "spec.provider.baseURL: must not contain user credentials" in warned["message"]
    assert "s3cret" not in warned["message"]
    valid = found["ConfigurationValid"]
    assert (valid["status"], valid["reason"]) == ("True", "ReferencesResolved"), "unchanged"

    (event,) = [d for d in decide_events(None, status) if d.reason == "AcceptedWithWarnings"]
    assert (event.type, event.action, event.note) == (
        "Warning",
        "ValidateConfiguration",
        warned["message"],
    )
    again = reconciled_status(obj, previous=status)
    assert not [d for d in decide_events(status, again) if d.reason == "AcceptedWithWarnings"]


def test_a_runtime_without_violations_has_no_warnings_condition() -> None:
    status = reconciled_status(copy.deepcopy(VALID))
    assert "ConfigurationWarnings" not in {c["type"] for c in status["conditions"]}
