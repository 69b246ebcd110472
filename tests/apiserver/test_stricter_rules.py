"""The API server's verdict on what the operator renders for a stored runtime (ADR 0024).

The ratcheting policy tolerates a rule on a stored runtime only where the
render (what the Go operator rendered) is accepted; the rules it still
enforces beyond the Go CRD are those whose rendered objects the API server
refuses. Both claims, checked with a server-side dry run of every object.
"""

import copy
import json
from typing import Any

import pytest

from devcluster import ControlPlane
from tests.support.stricter_rules import APPARMOR, FROZEN, SECCOMP_CONTAINER, TOLERATED
from trussium_operator.common.ratcheting import TolerableRule
from trussium_operator.common.validation import validate_runtime
from trussium_operator.controller.runtime.kinds import render_managed_objects

pytestmark = pytest.mark.api
# Rules of the Go CRD itself, which no stored object breaks: nothing rendered to check.
GO_CRD_RULES = {"a Go CRD rule"}


def refusals(plane: ControlPlane, namespace: str, obj: dict[str, Any]) -> list[str]:
    """The API server's refusals of each object rendered for `obj` (server-side dry run)."""
    stored = copy.deepcopy(obj)
    stored["metadata"] |= {"namespace": namespace, "uid": "0b1c2d3e-0000-4000-8000-000000000000"}
    runtime = validate_runtime(stored, stored=True).runtime
    assert runtime is not None, "rendered from the stored spec"
    found = []
    for manifest in render_managed_objects(runtime):
        answer = plane.kubectl(
            "create", "--dry-run=server", "-f", "-", input=json.dumps(manifest), check=False
        )
        if answer.returncode != 0:
            found.append(f"{manifest['kind']}: {answer.stderr.strip()}")
    return found


@pytest.mark.parametrize("rule", list(TolerableRule))
def test_the_render_of_a_tolerated_violation_is_accepted(
    plane: ControlPlane, namespace: str, rule: TolerableRule
) -> None:
    assert refusals(plane, namespace, TOLERATED[rule]) == []


# Before 1.34 DynamicResourceAllocation is off by default, and the API server drops a
# container's resources.claims instead of refusing them: the render would lose the claim.
CLAIMS_SERVED_FROM_MINOR = 34


def claims_kept(plane: ControlPlane, namespace: str, obj: dict[str, Any]) -> bool:
    """Whether the API server keeps the claims of the rendered Deployment (dry run)."""
    stored = copy.deepcopy(obj)
    stored["metadata"] |= {"namespace": namespace, "uid": "0b1c2d3e-0000-4000-8000-000000000000"}
    runtime = validate_runtime(stored, stored=True).runtime
    assert runtime is not None, "rendered from the stored spec"
    (deployment,) = (o for o in render_managed_objects(runtime) if o["kind"] == "Deployment")
    created = plane.kubectl(
        "create", "--dry-run=server", "-o", "json", "-f", "-", input=json.dumps(deployment)
    )
    container = json.loads(created.stdout)["spec"]["template"]["spec"]["containers"][0]
    return "claims" in container.get("resources", {})


@pytest.mark.parametrize("case", sorted(set(FROZEN) - GO_CRD_RULES))
def test_the_render_of_an_enforced_violation_is_refused(
    plane: ControlPlane, namespace: str, case: str
) -> None:
    obj, _ = FROZEN[case]
    if case == "claim name" and plane.minor < CLAIMS_SERVED_FROM_MINOR:
        assert not claims_kept(plane, namespace, obj), "1.32 and 1.33 drop the claims"
        return
    assert refusals(plane, namespace, obj), f"{case}: the API server accepts its objects"


def test_tolerated_security_annotations_are_what_kubernetes_says_they_are(
    plane: ControlPlane, namespace: str
) -> None:
    """A seccomp annotation is inert, an AppArmor one still acts (ADR 0024's reasoning)."""
    obj = copy.deepcopy(TOLERATED[TolerableRule.SECURITY_PROFILE_ANNOTATION])
    obj["spec"]["podMetadata"]["annotations"][f"{SECCOMP_CONTAINER}trussium"] = "unconfined"
    obj["metadata"] |= {"namespace": namespace, "uid": "0b1c2d3e-0000-4000-8000-000000000000"}
    runtime = validate_runtime(obj, stored=True).runtime
    assert runtime is not None
    objects = {o["kind"]: o for o in render_managed_objects(runtime)}
    deployment = objects["Deployment"]
    answer = plane.kubectl(
        "create", "--dry-run=server", "-f", "-", input=json.dumps(deployment), check=False
    )
    assert answer.returncode == 0, answer.stderr
    assert f"{SECCOMP_CONTAINER}trussium]: non-functional in v1.27+" in answer.stderr
    assert f"{APPARMOR}trussium]: deprecated since v1.30" in answer.stderr
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "probe", "namespace": namespace}
        | {"annotations": deployment["spec"]["template"]["metadata"]["annotations"]},
        "spec": deployment["spec"]["template"]["spec"],
    }
    plane.kubectl("create", "-f", "-", input=json.dumps(objects["ServiceAccount"]))
    answer = plane.kubectl(
        "create", "--dry-run=server", "-o", "json", "-f", "-", input=json.dumps(pod)
    )
    (container,) = json.loads(answer.stdout)["spec"]["containers"]
    assert container["securityContext"]["appArmorProfile"] == {"type": "Unconfined"}
    assert "seccompProfile" not in container["securityContext"], "the seccomp one is inert"
