"""What the chart grants a ServiceAccount, and what the API server's audit log says it used.

Both sides are data: the grants come from the rendered chart (every Role and
ClusterRole bound to the account, each rule expanded to one verb on one
resource, and name), the requests from kube-apiserver's audit log (devcluster
writes one Metadata-level event per request). A grant no request matched is
unused, or used only where the audit log cannot see it (an admission plugin's
own authorization check): the RBAC audit test then proves it by removal.
"""

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

Obj = dict[str, Any]
ROLE_KINDS = ("Role", "ClusterRole")
BINDING_KINDS = ("RoleBinding", "ClusterRoleBinding")
FORBIDDEN = 403
CREATED = 201


def username(namespace: str, account: str) -> str:
    return f"system:serviceaccount:{namespace}:{account}"


@dataclass(frozen=True, order=True)
class Grant:
    """One verb on one resource (`plural` or `plural/subresource`), in one namespace (None:
    every namespace, or a cluster-scoped resource), limited to one name or not."""

    role: str  # Kind/name of the role in the chart
    namespace: str | None
    group: str
    resource: str
    verb: str
    name: str | None = None

    def __str__(self) -> str:
        where = f" in {self.namespace}" if self.namespace else ""
        named = f" named {self.name}" if self.name else ""
        group = self.group or "core"
        return f"{self.verb} {group}/{self.resource}{named}{where} ({self.role})"

    def allows(self, request: "Request") -> bool:
        return (
            self.group in ("*", request.group)
            and self.resource in ("*", request.resource)
            and self.verb in ("*", request.verb)
            and (self.namespace is None or self.namespace == request.namespace)
            and (self.name is None or self.name == request.name)
        )


@dataclass(frozen=True)
class Request:
    """One authorization the API server made for a request (a patch that created its
    object was authorized as a create too)."""

    user: str
    group: str
    resource: str
    verb: str
    namespace: str | None
    name: str | None
    code: int
    uri: str
    at: datetime


def _roles(objects: Iterable[Obj]) -> dict[tuple[str, str | None, str], Obj]:
    return {
        (o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]): o
        for o in objects
        if o["kind"] in ROLE_KINDS
    }


def _binds(binding: Obj, namespace: str, account: str) -> bool:
    return any(
        s.get("kind") == "ServiceAccount"
        and s.get("name") == account
        and s.get("namespace") == namespace
        for s in binding.get("subjects") or ()
    )


def grants(objects: Iterable[Obj], namespace: str, account: str) -> set[Grant]:
    """Every grant the chart's bindings give the account `namespace/account`."""
    objects = list(objects)
    roles = _roles(objects)
    found: set[Grant] = set()
    for binding in objects:
        if binding["kind"] not in BINDING_KINDS or not _binds(binding, namespace, account):
            continue
        ref = binding["roleRef"]
        scope = binding["metadata"].get("namespace")  # None for a ClusterRoleBinding
        role_namespace = scope if ref["kind"] == "Role" else None
        role = roles.get((ref["kind"], role_namespace, ref["name"]))
        assert role is not None, f"{binding['metadata']['name']} binds a role the chart lacks"
        found |= set(_expand(role, f"{ref['kind']}/{ref['name']}", scope))
    return found


def _expand(role: Obj, label: str, namespace: str | None) -> Iterator[Grant]:
    for rule in role.get("rules") or ():
        assert not rule.get("nonResourceURLs"), f"{label}: nonResourceURLs are not audited here"
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                for verb in rule["verbs"]:
                    for name in rule.get("resourceNames") or [None]:
                        yield Grant(label, namespace, group, resource, verb, name)


def requests(audit_log: Path, users: Iterable[str]) -> list[Request]:
    """The resource requests of `users` in the audit log (and its rotated files)."""
    wanted = set(users)
    files = [*sorted(audit_log.parent.glob(f"{audit_log.stem}-*{audit_log.suffix}")), audit_log]
    found: list[Request] = []
    for path in files:
        with path.open() as log:
            for line in log:
                event = json.loads(line)
                if event.get("user", {}).get("username") in wanted:
                    found += _authorized(event)
    return found


def _authorized(event: Obj) -> list[Request]:
    ref = event.get("objectRef")
    if not ref or not ref.get("resource"):
        return []  # discovery and other non-resource URLs: not the chart's rules
    resource = ref["resource"] + (f"/{ref['subresource']}" if ref.get("subresource") else "")
    code = int((event.get("responseStatus") or {}).get("code") or 0)
    verbs = [event["verb"]]
    if event["verb"] == "patch" and code == CREATED:  # server-side apply of a new object
        verbs.append("create")
    return [
        Request(
            event["user"]["username"],
            ref.get("apiGroup", ""),
            resource,
            verb,
            ref.get("namespace"),
            ref.get("name"),
            code,
            str(event.get("requestURI")),
            datetime.fromisoformat(event["requestReceivedTimestamp"].replace("Z", "+00:00")),
        )
        for verb in verbs
    ]


def denied(found: Iterable[Request]) -> list[str]:
    return sorted({f"{r.user}: {r.verb} {r.uri}" for r in found if r.code == FORBIDDEN})


def unexercised(granted: Iterable[Grant], found: Iterable[Request]) -> list[Grant]:
    """The grants no authorized request matched."""
    used = [r for r in found if r.code != FORBIDDEN]
    return sorted(g for g in granted if not any(g.allows(r) for r in used))


def without(role: Obj, grant: Grant) -> Obj:
    """`role` with `grant`'s one verb (on its one resource and name) taken out."""
    rules: list[Obj] = []
    for rule in role.get("rules") or ():
        names = rule.get("resourceNames") or [None]
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                for name in names:
                    hit = (group, resource, name) == (grant.group, grant.resource, grant.name)
                    verbs = [v for v in rule["verbs"] if not (hit and v == grant.verb)]
                    if verbs:
                        rules.append(
                            {"apiGroups": [group], "resources": [resource], "verbs": verbs}
                            | ({"resourceNames": [name]} if name else {})
                        )
    return role | {"rules": rules}
