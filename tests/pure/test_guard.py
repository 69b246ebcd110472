"""The managed-Deployment guard: who may change what on a Deployment the operator owns."""

import copy
from typing import Any

import pytest

from tests.support.deployments import managed_deployment
from trussium_operator.common.guard import review_managed_deployment_update

OPERATOR = "system:serviceaccount:trussium-system:trussium-operator"
ADMIN = "kubernetes-admin"


def edited(change: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    old = managed_deployment()
    new = copy.deepcopy(old)
    change(new)
    return old, new


def add_sidecar(deployment: dict[str, Any]) -> None:
    deployment["spec"]["template"]["spec"]["containers"].append(
        {"name": "debug", "image": "busybox", "securityContext": {"privileged": True}}
    )


def test_operator_may_change_anything() -> None:
    old, new = edited(add_sidecar)
    assert review_managed_deployment_update(old, new, OPERATOR, OPERATOR).allowed


def test_sidecar_by_admin_is_refused_naming_the_owner() -> None:
    old, new = edited(add_sidecar)
    verdict = review_managed_deployment_update(old, new, ADMIN, OPERATOR)
    assert not verdict.allowed
    assert "TrussiumRuntime team-a/chat-owner" in verdict.message
    assert "spec.template.spec.containers" in verdict.message
    assert "spec.image / spec.resources" in verdict.message


def test_owner_falls_back_to_instance_label() -> None:
    def change(deployment: dict[str, Any]) -> None:
        deployment["spec"]["template"]["spec"]["containers"][0]["image"] = "evil:1"

    old, new = edited(change)
    del old["metadata"]["ownerReferences"]
    verdict = review_managed_deployment_update(old, new, ADMIN, OPERATOR)
    assert "TrussiumRuntime team-a/chat" in verdict.message


@pytest.mark.parametrize(
    ("path", "value", "runtime_field"),
    [
        (("containers", 0, "image"), "other:2", "comes from its spec.image"),
        (("containers", 0, "resources"), {"limits": {"cpu": "9"}}, "comes from its spec.resources"),
        (("nodeSelector",), {"disk": "hdd"}, "comes from its spec.scheduling.nodeSelector"),
        (("tolerations",), [{"operator": "Exists"}], "comes from its spec.scheduling.tolerations"),
        (("hostNetwork",), True, "spec.template.spec.hostNetwork is fixed by the operator"),
        (
            ("volumes",),
            [{"name": "scratch", "emptyDir": {"sizeLimit": "100Gi"}}],
            "comes from its spec.scratch.sizeLimit",
        ),
        (
            ("securityContext",),
            {"runAsUser": 0},
            "spec.template.spec.securityContext.runAsUser is fixed by the operator",
        ),
        (
            ("terminationGracePeriodSeconds",),
            5,
            "comes from its spec.runtime.shutdownDrainTimeoutSeconds",
        ),
    ],
)
def test_pod_spec_edits_are_mapped_to_the_runtime_field(
    path: tuple[str | int, ...], value: Any, runtime_field: str
) -> None:
    def change(deployment: dict[str, Any]) -> None:
        target = deployment["spec"]["template"]["spec"]
        for segment in path[:-1]:
            target = target[segment]
        target[path[-1]] = value

    old, new = edited(change)
    verdict = review_managed_deployment_update(old, new, ADMIN, OPERATOR)
    assert not verdict.allowed
    assert runtime_field in verdict.message


def test_direct_replicas_edit_is_refused() -> None:
    old, new = edited(lambda d: d["spec"].update(replicas=5))
    verdict = review_managed_deployment_update(old, new, ADMIN, OPERATOR)
    assert not verdict.allowed
    assert "spec.replicas comes from its spec.replicas" in verdict.message


def test_rollout_restart_is_allowed() -> None:
    def restart(deployment: dict[str, Any]) -> None:
        annotations = deployment["spec"]["template"]["metadata"]["annotations"]
        annotations["kubectl.kubernetes.io/restartedAt"] = "2026-01-01T00:00:00Z"

    assert review_managed_deployment_update(*edited(restart), ADMIN, OPERATOR).allowed


def test_first_rollout_restart_without_template_annotations_is_allowed() -> None:
    def restart(deployment: dict[str, Any]) -> None:
        deployment["spec"]["template"]["metadata"] = {
            "annotations": {"kubectl.kubernetes.io/restartedAt": "2026-01-01T00:00:00Z"}
        }

    old = managed_deployment()
    del old["spec"]["template"]["metadata"]
    new = copy.deepcopy(old)
    restart(new)
    assert review_managed_deployment_update(old, new, ADMIN, OPERATOR).allowed


def test_pod_annotation_other_than_restart_is_refused() -> None:
    def annotate(deployment: dict[str, Any]) -> None:
        deployment["spec"]["template"]["metadata"]["annotations"]["team"] = "a"

    verdict = review_managed_deployment_update(*edited(annotate), ADMIN, OPERATOR)
    assert not verdict.allowed
    assert "comes from its spec.podMetadata.annotations" in verdict.message


def test_pause_and_resume_are_allowed() -> None:
    assert review_managed_deployment_update(
        *edited(lambda d: d["spec"].update(paused=True)), ADMIN, OPERATOR
    ).allowed


def test_own_metadata_is_allowed() -> None:
    def annotate(deployment: dict[str, Any]) -> None:
        deployment["metadata"]["annotations"] = {"team": "a"}
        deployment["metadata"]["labels"]["cost-center"] = "42"
        deployment["metadata"]["ownerReferences"] = []

    assert review_managed_deployment_update(*edited(annotate), ADMIN, OPERATOR).allowed


@pytest.mark.parametrize("key", ["app.kubernetes.io/instance", "app.kubernetes.io/managed-by"])
def test_changing_or_removing_operator_labels_is_refused(key: str) -> None:
    for change in (
        lambda d: d["metadata"]["labels"].pop(key),
        lambda d: d["metadata"]["labels"].update({key: "mine"}),
    ):
        verdict = review_managed_deployment_update(*edited(change), ADMIN, OPERATOR)
        assert not verdict.allowed
        assert key in verdict.message


def test_deployment_not_yet_managed_is_not_guarded() -> None:
    old = managed_deployment()
    del old["metadata"]["labels"]["app.kubernetes.io/managed-by"]
    new = copy.deepcopy(old)
    add_sidecar(new)
    assert review_managed_deployment_update(old, new, ADMIN, OPERATOR).allowed


def test_long_lists_of_changes_are_summarised() -> None:
    def many(deployment: dict[str, Any]) -> None:
        pod = deployment["spec"]["template"]["spec"]
        pod.update({f"field{index}": index for index in range(8)})

    verdict = review_managed_deployment_update(*edited(many), ADMIN, OPERATOR)
    assert "and 3 more" in verdict.message
