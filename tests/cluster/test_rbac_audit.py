"""Least privilege, proven from the API server's audit log (ADR 0028).

The controller and the webhook run on the host with tokens of the chart's own
ServiceAccounts, under exactly the RBAC `helm install` created, through
everything they do: every managed kind applied, the optional NetworkPolicy and
HorizontalPodAutoscaler deleted when turned off, legacy field managers taken
over, a missing and then a present Secret, status, Events, the leader Lease and
the Go operator's, the webhook's certificates and CA injection (the
controller's, ADR 0029) where the mode has them, orphaned objects adopted by a
recreated runtime, and a scrape of each program's /metrics with a token (their
TokenReviews and SubjectAccessReviews). Then:

- no request of either account was refused (403);
- every grant of the rendered chart was used: an authorized request in the audit
  log matches it, or, for a check the audit log cannot show (an admission
  plugin's own), taking that one grant away gets the same work refused.

The API server runs with OwnerReferencesPermissionEnforcement, as OpenShift's
does: it asks for `update` on the runtime's finalizers to set blockOwnerDeletion,
and for `delete` on an object whose owner references an update changes.
"""

import base64
import json
import ssl
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from devcluster import ControlPlane, Profile
from devcluster.controller_harness import (
    get,
    must_get,
    now,
    runtime_manifest,
    wait_condition,
    wait_for,
)
from devcluster.hostoperator import install_crds
from devcluster.layout import free_port
from tests.support import rbac_audit
from tests.support.chart import CHART, fullname, release_name, render
from tests.support.host_programs import (
    provided_certificate,
    running_chart_programs,
)
from tests.support.pod_monitor_crd import pod_monitor_crd
from trussium_operator.common.api import TrussiumRuntime
from trussium_operator.controller.runtime.kinds import MANAGED_KINDS, disabled_kinds

OWN_PLANE = pytest.mark.own_plane("the API server's audit log")
pytestmark = [pytest.mark.cluster, OWN_PLANE]

ADMISSION = "--enable-admission-plugins=OwnerReferencesPermissionEnforcement"
LEGACY_MANAGER = "manager"  # the Go operator's field manager (the chart's legacyFieldManagers)
SECRET_VALUE = "sk-rbac-audit-do-not-log"
EVERY_FEATURE: dict[str, Any] = {
    "networkPolicy": {"enabled": True, "ingress": [{"namespaceSelector": {}}]},
    "autoscaling": {"enabled": True, "minReplicas": 1, "maxReplicas": 3},
    "resources": {"requests": {"cpu": "100m"}},
    "observability": {"monitor": {"enabled": True}},
}
EVERY = [k.resource.plural for k in MANAGED_KINDS]
# The kinds every runtime has (the others are turned on by its spec).
_PLAIN = TrussiumRuntime.model_validate(
    runtime_manifest("plain", "any") | {"metadata": {"name": "plain", "namespace": "any"}}
)
ALWAYS = [k.resource.plural for k in MANAGED_KINDS if k not in disabled_kinds(_PLAIN)]
# The modes whose RBAC differs: scope, Secret checks, certificate handling.
MODES = {
    "cluster-wide": [],
    "watch-namespace": ["--set", "webhook.secretLookup=true"],
    "no-secret-rights": ["--set", "controller.checkSecretReferences=false"],
}


@pytest.fixture(scope="module")
def audited() -> Iterator[ControlPlane]:
    with ControlPlane(Profile.CLUSTER, apiserver_args=[ADMISSION]) as plane:
        install_crds(plane)
        # The optional kind's API served, so its grants are exercised too.
        plane.kubectl("apply", "--server-side", "-f", "-", input=json.dumps(pod_monitor_crd()))
        yield plane


@pytest.mark.parametrize("mode", MODES)
def test_each_grant_is_used_and_nothing_is_refused(
    audited: ControlPlane, tmp_path: Path, mode: str
) -> None:
    plane, release, port, webhook_metrics = audited, release_name(), free_port(), free_port()
    name, ops, apps = fullname(release), f"ops-{release}", f"apps-{release}"
    plane.create_namespace(ops)
    plane.create_namespace(apps)
    values = [*MODES[mode]]
    if mode == "watch-namespace":
        values += ["--set", f"watchNamespace={apps}"]
    if mode == "no-secret-rights":  # certificates the webhook does not write itself
        values += provided_certificate(tmp_path, f"{name}-webhook-tls")
    in_pod = render(plane, release, ops, *values)
    accounts = {c: f"{name}-{c}" for c in ("controller", "webhook")}
    users = [rbac_audit.username(ops, a) for a in accounts.values()]
    plane.helm(
        "install", release, str(CHART), "--namespace", ops, *values,
        "--set", f"webhook.urlOverride=https://127.0.0.1:{port}",
        "--set", "controller.replicas=0", "--set", "crds.enabled=false",
        "--wait", "--timeout", "120s",
    )  # fmt: skip
    installed = render(plane, release, ops, *values, "--set", "crds.enabled=false")
    try:
        with running_chart_programs(plane, in_pod, ops, port, tmp_path, webhook_metrics) as (
            controller,
            configs,
        ):
            _everything_they_do(plane, apps, checked=mode != "no-secret-rights")
            _scrape_with_a_token(plane, ops, name, [controller.metrics_port, webhook_metrics])
            granted = {g for a in accounts.values() for g in rbac_audit.grants(installed, ops, a)}
            _controller_rewrites_the_certificates(
                plane,
                ops,
                [
                    g.name
                    for g in granted
                    if g.resource == "secrets" and g.verb == "update" and g.name
                ],
            )
            found = rbac_audit.requests(plane.audit_log, users)
            assert rbac_audit.denied(found) == []
            if mode == "no-secret-rights":
                assert not [g for g in granted if g.resource == "secrets"]
            unseen = rbac_audit.unexercised(granted, found)
            unneeded = [
                g
                for i, g in enumerate(unseen)
                if not _refused_without(plane, g, users, apps, f"probe-{i}")
            ]
            assert unneeded == [], "granted, never used:\n" + "\n".join(map(str, unneeded))
            logs = (tmp_path / "webhook.log").read_text() + controller.logs()
            assert SECRET_VALUE not in logs
        _what_a_stolen_controller_token_can_do(
            plane, configs["controller"], mode, apps, (ops, accounts["webhook"])
        )
    finally:
        plane.helm("uninstall", release, "--namespace", ops, "--wait", check=False)
        for gone in (apps, ops):  # gone before the next mode's controller watches everything
            plane.delete_namespace(gone)
        wait_for(
            lambda: all(
                plane.kubectl("get", "namespace", n, check=False).returncode != 0
                for n in (apps, ops)
            ),
            "the test's namespaces deleted",
            180,
        )


def _what_a_stolen_controller_token_can_do(
    plane: ControlPlane, token: Path, mode: str, apps: str, other: tuple[str, str]
) -> None:
    """The threat model of docs/security.md, with the controller's own token: a Secret
    list returns values, whatever the client asks for, and a Deployment may run as
    any ServiceAccount of a namespace it may write to (`other`: the webhook's)."""
    ops, account = other
    values = plane.kubectl(
        "get", "secrets", "-n", apps, "-o", "jsonpath={.items[*].data.apiKey}",
        kubeconfig=token, check=False,
    )  # fmt: skip
    if mode == "no-secret-rights":
        assert "Forbidden" in values.stderr
    else:
        assert values.stdout == base64.b64encode(SECRET_VALUE.encode()).decode()
    elsewhere = plane.kubectl(
        "get", "secrets", "-n", ops, "-o", "name", kubeconfig=token, check=False
    )
    assert ("Forbidden" in elsewhere.stderr) is (mode != "cluster-wide")
    impostor = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "impostor", "namespace": ops},
        "spec": {
            "selector": {"matchLabels": {"app": "impostor"}},
            "template": {
                "metadata": {"labels": {"app": "impostor"}},
                "spec": {
                    "serviceAccountName": account,
                    "containers": [{"name": "c", "image": "busybox"}],
                },
            },
        },
    }
    created = plane.kubectl(
        "create", "--dry-run=server", "-f", "-", input=json.dumps(impostor),
        kubeconfig=token, check=False,
    )  # fmt: skip
    assert (created.returncode == 0) is (mode != "watch-namespace"), created.stderr


def _everything_they_do(plane: ControlPlane, apps: str, *, checked: bool) -> None:
    chat = runtime_manifest(
        "chat",
        apps,
        provider={
            "type": "openai",
            "model": "gpt-4o-mini",
            "credentialsSecretRef": {"name": "openai", "key": "apiKey"},
        },
    )
    _create(plane, chat)  # through the webhook, once the API server trusts it
    if checked:
        wait_condition(plane, "chat", apps, "ConfigurationValid", "False", "SecretNotFound")
        plane.kubectl(
            "create", "secret", "generic", "openai", "-n", apps,
            f"--from-literal=apiKey={SECRET_VALUE}",
        )  # fmt: skip
    ready = wait_condition(plane, "chat", apps, "Ready", "True", "RuntimeReady", timeout=120)
    valid = _condition(ready, "ConfigurationValid")
    assert (valid["status"], valid["reason"]) == ("True", "ReferencesResolved")
    assert ("not checked" in valid["message"]) is not checked, valid["message"]

    # Every kind, the optional ones too; their fields taken over from a legacy manager.
    _create(plane, runtime_manifest("full", apps, **EVERY_FEATURE))
    wait_for(lambda: all(get(plane, k, "full", apps) for k in EVERY), "every kind applied")
    for plural in EVERY:
        plane.kubectl(
            "annotate", plural, "full", "-n", apps, "legacy=1", f"--field-manager={LEGACY_MANAGER}"
        )
    wait_for(
        lambda: not any(_legacy_owned(plane, k, "full", apps) for k in EVERY),
        "the legacy manager's fields to be taken over",
    )
    # Turned off: the optional objects are deleted.
    plane.kubectl(
        "patch", "trussiumruntime", "full", "-n", apps, "--type=merge",
        "-p", '{"spec":{"networkPolicy":{"enabled":false},"autoscaling":{"enabled":false},'
        '"observability":{"monitor":{"enabled":false}}}}',
    )  # fmt: skip
    optional = sorted(set(EVERY) - set(ALWAYS))
    wait_for(
        lambda: not any(get(plane, k, "full", apps) for k in optional),
        "the disabled kinds' objects to be deleted",
    )
    _orphan_and_adopt(plane, apps, chat)


def _scrape_with_a_token(plane: ControlPlane, namespace: str, name: str, ports: list[int]) -> None:
    """A scraper bound to the chart's metrics-viewer role reads each program's /metrics
    over HTTPS: each program reviews its token with its own ServiceAccount's rights."""
    plane.kubectl("create", "serviceaccount", "scraper", "-n", namespace)
    plane.kubectl(
        "create", "clusterrolebinding", f"{name}-scraper",
        f"--clusterrole={name}-metrics-viewer", f"--serviceaccount={namespace}:scraper",
    )  # fmt: skip
    token = plane.kubectl("create", "token", "scraper", "-n", namespace).stdout.strip()
    unverified = ssl.create_default_context()
    unverified.check_hostname, unverified.verify_mode = False, ssl.CERT_NONE  # self-signed
    try:
        for port in ports:
            request = urllib.request.Request(
                f"https://127.0.0.1:{port}/metrics", headers={"Authorization": f"Bearer {token}"}
            )
            with urllib.request.urlopen(request, timeout=10, context=unverified) as answer:
                assert answer.status == 200
    finally:
        plane.kubectl("delete", "clusterrolebinding", f"{name}-scraper")


def _controller_rewrites_the_certificates(
    plane: ControlPlane, namespace: str, secrets: list[str]
) -> None:
    """Where the controller keeps the webhook's certificate Secrets (ADR 0029): spoil
    them, and its next check (every minute) writes them over (the write a renewal makes)."""
    spoiled = "eA=="
    for secret in secrets:
        plane.kubectl(
            "patch", "secret", secret, "-n", namespace, "--type=merge",
            "-p", json.dumps({"data": {"tls.crt": spoiled}}),
        )  # fmt: skip
    for secret in secrets:

        def rewritten(name: str = secret) -> bool:
            return bool(must_get(plane, "secret", name, namespace)["data"]["tls.crt"] != spoiled)

        wait_for(rewritten, f"the controller to rewrite Secret {secret}", timeout=150)


def _orphan_and_adopt(
    plane: ControlPlane,
    apps: str,
    runtime: dict[str, Any],
    refused: Callable[[], bool] = lambda: False,
) -> None:
    """Delete the runtime leaving its objects, recreate it, and wait until it owns them
    again, or until `refused`."""
    name = runtime["metadata"]["name"]
    plane.kubectl("delete", "trussiumruntime", name, "-n", apps, "--cascade=orphan", "--wait")
    wait_for(
        lambda: not any(_owner_uids(plane, k, name, apps) for k in ALWAYS),
        f"{name}'s objects to be orphaned",
    )
    _create(plane, runtime)
    uid = must_get(plane, "trussiumruntime", name, apps)["metadata"]["uid"]
    wait_for(
        lambda: refused() or all(_owner_uids(plane, k, name, apps) == [uid] for k in ALWAYS),
        f"{name}'s objects adopted",
    )


def _refused_without(
    plane: ControlPlane, grant: rbac_audit.Grant, users: list[str], apps: str, probe: str
) -> bool:
    """Whether the work is refused (a 403 for one of `users`) with `grant` taken away:
    a new runtime created, then orphaned and adopted again."""
    kind, role_name = grant.role.split("/")
    where = ["-n", grant.namespace] if kind == "Role" and grant.namespace else []
    role = json.loads(plane.kubectl("get", kind, role_name, *where, "-o", "json").stdout)
    role["metadata"].pop("resourceVersion", None)
    since = now()

    def refused() -> bool:
        found = rbac_audit.requests(plane.audit_log, users)
        return any(r.code == rbac_audit.FORBIDDEN and r.at >= since for r in found)

    plane.kubectl("replace", "-f", "-", input=json.dumps(rbac_audit.without(role, grant)))
    try:
        manifest = runtime_manifest(probe, apps)
        _create(plane, manifest)
        wait_for(
            lambda: refused() or all(_owner_uids(plane, k, probe, apps) for k in ALWAYS),
            f"{probe}: refused or applied without {grant}",
        )
        if not refused():
            _orphan_and_adopt(plane, apps, manifest, refused)
        return refused()
    finally:
        plane.kubectl("replace", "-f", "-", input=json.dumps(role))


def _create(plane: ControlPlane, runtime: dict[str, Any]) -> None:
    body = json.dumps(runtime)

    def created() -> bool:
        answer = plane.kubectl("create", "-f", "-", input=body, check=False)
        assert answer.returncode == 0 or "failed calling webhook" in answer.stderr, answer.stderr
        return answer.returncode == 0

    wait_for(created, f"{runtime['metadata']['name']} created through the webhook", 60)


def _condition(runtime: dict[str, Any], type_: str) -> dict[str, Any]:
    conditions = runtime.get("status", {}).get("conditions", [])
    return next(c for c in conditions if c["type"] == type_)


def _owner_uids(plane: ControlPlane, plural: str, name: str, namespace: str) -> list[str]:
    obj = get(plane, plural, name, namespace) or {"metadata": {}}
    return [ref["uid"] for ref in obj["metadata"].get("ownerReferences") or ()]


def _legacy_owned(plane: ControlPlane, plural: str, name: str, namespace: str) -> bool:
    answer = plane.kubectl(
        "get", plural, name, "-n", namespace, "-o", "json", "--show-managed-fields"
    )
    entries = json.loads(answer.stdout)["metadata"].get("managedFields") or ()
    return any(e.get("manager") == LEGACY_MANAGER for e in entries)
