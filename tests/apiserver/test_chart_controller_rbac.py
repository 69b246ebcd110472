"""The chart grants the controller exactly the managed kinds of its registry
(`controller/runtime/kinds.py`): a kind added there without its RBAC, or RBAC left behind
for a kind that is gone, fails here before it fails on a cluster."""

from typing import Any

import pytest

from devcluster import ControlPlane
from tests.support.chart import find, fullname, release_name, render
from trussium_operator.controller.runtime.kinds import MANAGED_KINDS

pytestmark = pytest.mark.api

# What the controller may touch besides the managed kinds (contract section 9).
OTHER_RESOURCES = {
    ("runtime.trussium.io", "trussiumruntimes"),
    ("runtime.trussium.io", "trussiumruntimes/status"),
    ("runtime.trussium.io", "trussiumruntimes/finalizers"),
    ("", "secrets"),
    ("events.k8s.io", "events"),
}


def granted(rules: list[dict[str, Any]]) -> dict[tuple[str, str], set[str]]:
    verbs: dict[tuple[str, str], set[str]] = {}
    for rule in rules:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                verbs.setdefault((group, resource), set()).update(rule["verbs"])
    return verbs


@pytest.mark.parametrize("scope", ["cluster", "namespace"])
def test_the_controller_role_grants_each_registered_kind_and_nothing_else(
    plane: ControlPlane, scope: str
) -> None:
    release = release_name()
    args = ("--set", "watchNamespace=team") if scope == "namespace" else ()
    objects = render(plane, release, "ops", *args)
    role_kind = "Role" if scope == "namespace" else "ClusterRole"
    role = find(objects, role_kind, f"{fullname(release)}-controller")
    verbs = granted(role["rules"])
    registered = {
        (k.resource.api_version.rpartition("/")[0], k.resource.plural): set(k.verbs)
        for k in MANAGED_KINDS
    }
    assert {r: verbs[r] for r in registered if r in verbs} == registered
    assert set(verbs) - set(registered) == OTHER_RESOURCES
