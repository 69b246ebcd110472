"""The RBAC audit's two sides, on hand-made objects and audit events: which grants a
binding gives, which requests match them (tests/cluster/test_rbac_audit.py runs it
on the real audit log)."""

import json
from pathlib import Path
from typing import Any

from tests.support.rbac_audit import Grant, denied, grants, requests, unexercised, without

SA = {"kind": "ServiceAccount", "name": "ctl", "namespace": "ops"}
CLUSTER_ROLE = {
    "kind": "ClusterRole",
    "metadata": {"name": "ctl"},
    "rules": [
        {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["create", "patch"]},
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["list"]},
    ],
}
ROLE = {
    "kind": "Role",
    "metadata": {"name": "lease", "namespace": "ops"},
    "rules": [
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "resourceNames": ["mine"],
            "verbs": ["get", "update"],
        }
    ],
}


def binding(kind: str, role: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
    meta = {"name": role["metadata"]["name"]} | ({"namespace": namespace} if namespace else {})
    ref = {"kind": role["kind"], "name": role["metadata"]["name"]}
    return {"kind": kind, "metadata": meta, "roleRef": ref, "subjects": [SA]}


CHART = [
    CLUSTER_ROLE,
    ROLE,
    binding("ClusterRoleBinding", CLUSTER_ROLE),
    binding("RoleBinding", ROLE, "ops"),
    binding("RoleBinding", CLUSTER_ROLE, "apps") | {"subjects": [SA | {"name": "other"}]},
]


def event(verb: str, resource: str, code: int, **ref: str) -> dict[str, Any]:
    return {
        "user": {"username": "system:serviceaccount:ops:ctl"},
        "verb": verb,
        "objectRef": {"resource": resource, **ref},
        "responseStatus": {"code": code},
        "requestURI": f"/{resource}",
        "requestReceivedTimestamp": "2026-12-02T00:00:00.000000Z",
    }


def test_a_binding_gives_each_verb_of_its_role_in_its_scope_and_only_to_its_subjects() -> None:
    found = grants(CHART, "ops", "ctl")
    assert Grant("ClusterRole/ctl", None, "apps", "deployments", "patch") in found
    assert Grant("Role/lease", "ops", "coordination.k8s.io", "leases", "update", "mine") in found
    assert len(found) == 5
    assert grants(CHART, "ops", "other") == {
        Grant("ClusterRole/ctl", "apps", g.group, g.resource, g.verb)
        for g in found
        if g.role == "ClusterRole/ctl"
    }


def test_an_apply_that_created_its_object_uses_create_and_a_403_is_a_denial(
    tmp_path: Path,
) -> None:
    log = tmp_path / "audit.log"
    lines = [
        event("patch", "deployments", 201, apiGroup="apps", namespace="x", name="d"),
        event("update", "leases", 200, apiGroup="coordination.k8s.io", namespace="ops", name="x"),
        event("get", "leases", 404, apiGroup="coordination.k8s.io", namespace="ops", name="mine"),
        event("list", "secrets", 403, namespace="x"),
        {"user": {"username": "someone"}, "verb": "delete", "objectRef": {"resource": "pods"}},
        event("get", "", 200),  # a non-resource URL
    ]
    log.write_text("".join(json.dumps(line) + "\n" for line in lines))
    found = requests(log, ["system:serviceaccount:ops:ctl"])
    assert [(r.verb, r.resource) for r in found] == [
        ("patch", "deployments"),
        ("create", "deployments"),
        ("update", "leases"),
        ("get", "leases"),
        ("list", "secrets"),
    ]
    assert denied(found) == ["system:serviceaccount:ops:ctl: list /secrets"]
    unused = unexercised(grants(CHART, "ops", "ctl"), found)
    # update on the lease named "x" is not the grant for "mine"; the refused list uses nothing
    assert [(g.verb, g.resource) for g in unused] == [("list", "secrets"), ("update", "leases")]


def test_without_takes_one_verb_of_one_resource_away() -> None:
    role = {
        "kind": "ClusterRole",
        "metadata": {"name": "r"},
        "rules": [{"apiGroups": [""], "resources": ["configmaps", "services"], "verbs": ["get"]}],
    }
    taken = without(role, Grant("ClusterRole/r", None, "", "services", "get"))
    assert taken["rules"] == [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]
    named = without(
        ROLE, Grant("Role/lease", "ops", "coordination.k8s.io", "leases", "get", "mine")
    )
    assert named["rules"] == [
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "verbs": ["update"],
            "resourceNames": ["mine"],
        }
    ]
