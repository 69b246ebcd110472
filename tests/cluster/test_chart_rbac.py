"""The chart's RBAC is proven, not assumed: the real controller and webhook run on
the host with tokens of the chart's own ServiceAccounts and the chart's own flags,
the installed webhook configurations point at the host webhook (webhook.urlOverride),
and a TrussiumRuntime converges while everything outside the grant is refused."""

import json
from pathlib import Path

import pytest

from devcluster import ControlPlane
from devcluster.controller_harness import (
    get,
    must_get,
    runtime_manifest,
    wait_condition,
    wait_for,
)
from devcluster.hostoperator import install_crds
from devcluster.layout import free_port
from tests.support.chart import CHART, fullname, release_name, render
from tests.support.host_programs import (
    ca_injected,
    provided_certificate,
    running_chart_programs,
)

OWN_PLANE = pytest.mark.own_plane(
    "the operator as host processes that the API server calls on 127.0.0.1"
)
pytestmark = [pytest.mark.cluster, OWN_PLANE]
SECRET_VALUE = "sk-chart-rbac-do-not-log"  # must never show up in either program's log


def can_i(plane: ControlPlane, user: str, *request: str) -> bool:
    answer = plane.kubectl("auth", "can-i", f"--as={user}", *request, check=False)
    return answer.stdout.strip() == "yes"


def refused(plane: ControlPlane, kubeconfig: Path, *request: str) -> bool:
    answer = plane.kubectl(*request, kubeconfig=kubeconfig, check=False)
    return answer.returncode != 0 and "Forbidden" in answer.stderr


@pytest.mark.parametrize(
    ("scope", "mode", "lookup"),
    [
        ("cluster", "selfManaged", False),
        ("namespace", "selfManaged", True),
        ("cluster", "provided", True),
    ],
)
def test_chart_service_accounts_run_both_programs_and_nothing_more(
    plane: ControlPlane, namespace: str, tmp_path: Path, scope: str, mode: str, lookup: bool
) -> None:
    install_crds(plane)
    apps = f"{namespace}-apps"
    plane.create_namespace(apps)
    release, port = release_name(), free_port()
    name = fullname(release)
    values = ["--set", f"watchNamespace={apps}"] if scope == "namespace" else []
    values += ["--set", f"webhook.secretLookup={str(lookup).lower()}"]
    if mode == "provided":
        values += provided_certificate(tmp_path, f"{name}-webhook-tls")
    in_pod = render(plane, release, namespace, *values)
    controller_user = f"system:serviceaccount:{namespace}:{name}-controller"
    webhook_user = f"system:serviceaccount:{namespace}:{name}-webhook"
    try:
        plane.helm(
            "install",
            release,
            str(CHART),
            "--namespace",
            namespace,
            *values,
            "--set",
            f"webhook.urlOverride=https://127.0.0.1:{port}",
            "--set",
            "controller.replicas=0",
            "--set",
            "crds.enabled=false",
            "--wait",
            "--timeout",
            "120s",
        )
        with running_chart_programs(plane, in_pod, namespace, port, tmp_path) as (
            controller,
            configs,
        ):
            _prove_the_programs_work(plane, namespace, apps, name, mode, lookup)
            logs = (tmp_path / "webhook.log").read_text() + controller.logs()
            assert SECRET_VALUE not in logs
        _prove_the_grant_stops_there(
            plane,
            namespace,
            apps,
            name,
            scope,
            mode,
            lookup,
            {controller_user: configs["controller"], webhook_user: configs["webhook"]},
        )
        # No manifest sets caBundle, so an upgrade keeps the injected one (the controller,
        # which would re-inject it, is stopped by now).
        plane.helm(
            "upgrade",
            release,
            str(CHART),
            "--namespace",
            namespace,
            "--reset-then-reuse-values",
            "--set",
            "logLevel=debug",
            "--wait",
        )
        assert ca_injected(plane, name), "helm upgrade dropped the injected caBundle"
    finally:
        plane.helm("uninstall", release, "--namespace", namespace, "--wait", check=False)
        plane.delete_namespace(apps)


def _prove_the_programs_work(
    plane: ControlPlane, namespace: str, apps: str, name: str, mode: str, lookup: bool
) -> None:
    # Self-managed certificates, with the controller's own token: both Secrets and caBundles.
    wait_for(lambda: ca_injected(plane, name), "the CA in both configurations")
    if mode == "selfManaged":
        must_get(plane, "secret", f"{name}-webhook-tls", namespace)
        must_get(plane, "secret", f"{name}-webhook-ca", namespace)

    # Validation through the installed configurations (the API server calls the host webhook).
    bad = runtime_manifest("bad", apps, podMetadata={"labels": {"app.kubernetes.io/name": "x"}})

    def rejected_by_webhook() -> str | None:
        answer = plane.kubectl(
            "create", "--dry-run=server", "-f", "-", input=json.dumps(bad), check=False
        )
        # Until the API server trusts the injected CA: "failed calling webhook".
        return answer.stderr if "spec.podMetadata.labels" in answer.stderr else None

    message = wait_for(rejected_by_webhook, "the API server to reach the host webhook", 60)
    assert "is invalid" in message

    # The missing-Secret warning (opt-in) needs the webhook's Secret listing; the controller
    # reports the missing Secret either way (its Secret read) and converges once it exists.
    chat = runtime_manifest(
        "chat",
        apps,
        provider={
            "type": "openai",
            "model": "gpt-4o-mini",
            "credentialsSecretRef": {"name": "openai", "key": "apiKey"},
        },
    )
    created = plane.kubectl("create", "-f", "-", input=json.dumps(chat))
    assert ("Secret 'openai' does not exist" in created.stderr) is lookup, created.stderr
    wait_condition(plane, "chat", apps, "ConfigurationValid", "False", "SecretNotFound")
    plane.kubectl(
        "create", "secret", "generic", "openai", "-n", apps, f"--from-literal=apiKey={SECRET_VALUE}"
    )
    wait_condition(plane, "chat", apps, "Ready", "True", "RuntimeReady", timeout=120)
    events = plane.kubectl("get", "events.v1.events.k8s.io", "-n", apps, "-o", "json").stdout
    assert "RuntimeReady" in events

    # The guard: the controller's own updates pass, anyone else's spec edit is refused.
    plane.kubectl(
        "patch",
        "trussiumruntime",
        "chat",
        "-n",
        apps,
        "--type=merge",
        "-p",
        '{"spec":{"replicas":2}}',
    )
    wait_for(
        lambda: (get(plane, "deployment", "chat", apps) or {}).get("spec", {}).get("replicas") == 2,
        "the controller to update its Deployment through the guard",
    )
    edit = plane.kubectl(
        "patch",
        "deployment",
        "chat",
        "-n",
        apps,
        "--type=merge",
        "-p",
        '{"spec":{"minReadySeconds":7}}',
        check=False,
    )
    assert edit.returncode != 0
    assert f"TrussiumRuntime {apps}/chat" in edit.stderr


def _prove_the_grant_stops_there(
    plane: ControlPlane,
    namespace: str,
    apps: str,
    name: str,
    scope: str,
    mode: str,
    lookup: bool,
    kubeconfigs: dict[str, Path],
) -> None:
    controller, webhook = kubeconfigs
    assert can_i(plane, webhook, "list", "secrets", "-n", apps) is lookup
    assert can_i(plane, webhook, "list", "secrets", "-n", "default") is (
        lookup and scope == "cluster"
    ), "Secret listing beyond the served namespaces"
    for user in kubeconfigs:
        for request in (
            ("get", "pods", "-n", apps),
            ("list", "replicasets", "-n", apps),
            ("list", "nodes"),
            ("update", "secrets/openai", "-n", apps),
            ("patch", "secrets/openai", "-n", apps),
            ("delete", "secrets/openai", "-n", apps),
            ("patch", "validatingwebhookconfigurations/some-other-webhook"),
            ("patch", "mutatingwebhookconfigurations/some-other-webhook"),
        ):
            assert not can_i(plane, user, *request), f"{user} may {' '.join(request)}"
    assert not can_i(plane, controller, "create", "secrets", "-n", apps)
    assert not can_i(plane, controller, "get", "secrets/openai", "-n", apps), "values by name"
    assert not can_i(plane, webhook, "create", "secrets", "-n", apps)
    assert not can_i(plane, webhook, "get", "secrets/openai", "-n", apps), "values by name"
    assert not can_i(plane, webhook, "patch", "secrets/other", "-n", namespace)
    # Certificates (ADR 0029): the controller keeps them in selfManaged mode; the webhook
    # never writes a Secret or a configuration, and never reads a certificate Secret.
    self_managed = mode == "selfManaged"
    for secret in (f"{name}-webhook-tls", f"{name}-webhook-ca"):
        for verb in ("get", "update", "patch"):
            assert not can_i(plane, webhook, verb, f"secrets/{secret}", "-n", namespace)
        assert can_i(plane, controller, "update", f"secrets/{secret}", "-n", namespace) is (
            self_managed
        )
    assert not can_i(plane, webhook, "create", "secrets", "-n", namespace)
    assert can_i(plane, controller, "create", "secrets", "-n", namespace) is self_managed
    for kind in ("validatingwebhookconfigurations", "mutatingwebhookconfigurations"):
        assert not can_i(plane, webhook, "patch", f"{kind}/{name}")
        assert can_i(plane, controller, "patch", f"{kind}/{name}") is self_managed
    assert not can_i(plane, controller, "get", "leases/someone-elses-lock", "-n", namespace)
    assert can_i(plane, controller, "update", f"leases/{name}", "-n", namespace)
    everywhere = can_i(plane, controller, "list", "trussiumruntimes", "--all-namespaces")
    assert everywhere is (scope == "cluster")
    assert can_i(plane, controller, "list", "deployments", "-n", "default") is (scope == "cluster")

    # The same, as real requests with the ServiceAccounts' own tokens.
    for kubeconfig in kubeconfigs.values():
        assert refused(plane, kubeconfig, "get", "pods", "-n", apps)
        assert refused(plane, kubeconfig, "get", "replicasets", "-n", apps)
        assert refused(plane, kubeconfig, "get", "nodes")
        assert refused(
            plane,
            kubeconfig,
            "patch",
            "secret",
            "openai",
            "-n",
            apps,
            "--type=merge",
            "-p",
            '{"data":{"apiKey":"eA=="}}',
        )
        assert refused(
            plane,
            kubeconfig,
            "patch",
            "validatingwebhookconfiguration",
            "some-other-webhook",
            "--type=merge",
            "-p",
            "{}",
        )
    assert refused(plane, kubeconfigs[webhook], "get", "secret", "openai", "-n", apps)
    ca_secret = f"{name}-webhook-ca"
    assert refused(plane, kubeconfigs[webhook], "get", "secret", ca_secret, "-n", namespace)
    assert refused(
        plane,
        kubeconfigs[webhook],
        "patch",
        "validatingwebhookconfiguration",
        name,
        "--type=merge",
        "-p",
        "{}",
    )
    assert refused(plane, kubeconfigs[controller], "delete", "secret", "openai", "-n", apps)
