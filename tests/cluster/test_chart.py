"""The Helm chart on the real control plane: lint, schema, render, server dry-run,
install, upgrade and uninstall (cluster profile: the Deployments roll out on kwok
nodes)."""

import json
from typing import Any

import pytest

from devcluster import ControlPlane
from devcluster.hostoperator import install_crds
from tests.support.chart import (
    CERT_MODE_VALUES,
    CHART,
    as_list,
    container,
    find,
    flag,
    fullname,
    kinds,
    release_name,
    render,
    render_error,
)
from trussium_operator.controller.cli import parser as controller_parser
from trussium_operator.webhook.cli import build_parser as webhook_parser

pytestmark = pytest.mark.cluster

# What the controller uses of docs/contract.md section 9 (ADR 0028), plus the
# finalizers subresource (ADR 0003): tests/cluster/test_rbac_audit.py proves each used.
FULL_MANAGEMENT = ["get", "list", "watch", "create", "patch", "delete"]
CONTROLLER_RULES = [
    {
        "apiGroups": ["runtime.trussium.io"],
        "resources": ["trussiumruntimes"],
        "verbs": ["list", "watch"],
    },
    {
        "apiGroups": ["runtime.trussium.io"],
        "resources": ["trussiumruntimes/status"],
        "verbs": ["update"],
    },
    {
        "apiGroups": ["runtime.trussium.io"],
        "resources": ["trussiumruntimes/finalizers"],
        "verbs": ["update"],
    },
    {
        "apiGroups": [""],
        "resources": ["configmaps", "serviceaccounts", "services"],
        "verbs": FULL_MANAGEMENT,
    },
    {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": FULL_MANAGEMENT},
    {"apiGroups": ["policy"], "resources": ["poddisruptionbudgets"], "verbs": FULL_MANAGEMENT},
    {
        "apiGroups": ["networking.k8s.io"],
        "resources": ["networkpolicies"],
        "verbs": FULL_MANAGEMENT,
    },
    {
        "apiGroups": ["autoscaling"],
        "resources": ["horizontalpodautoscalers"],
        "verbs": FULL_MANAGEMENT,
    },
    {
        "apiGroups": ["monitoring.coreos.com"],
        "resources": ["podmonitors"],
        "verbs": FULL_MANAGEMENT,
    },
    {"apiGroups": [""], "resources": ["secrets"], "verbs": ["list", "watch"]},
    {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["create"]},
]
NOT_IN_CLUSTER = {"cert-manager.io", "monitoring.coreos.com"}


def secret_name(mode: str, name: str) -> str:
    return "my-webhook-tls" if mode == "provided" else f"{name}-webhook-tls"


def test_lint_is_clean_in_every_certificate_mode(plane: ControlPlane) -> None:
    for mode, values in CERT_MODE_VALUES.items():
        result = plane.helm("lint", "--strict", str(CHART), *values)
        assert "[WARNING]" not in result.stdout, f"{mode}: {result.stdout}"
        assert "[ERROR]" not in result.stdout, f"{mode}: {result.stdout}"


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (["--set", "certificates.mode=bogus"], "at '/certificates/mode': value must be one of"),
        (["--set", "webhook.replicas=-1"], "at '/webhook/replicas': minimum"),
        (["--set", "webhook.replicas=0"], "at '/webhook/replicas': minimum"),
        (["--set", "controller.replicas=-1"], "at '/controller/replicas': minimum"),
        (["--set", "controller.workers=0"], "at '/controller/workers': minimum"),
        (["--set", "controler.replicas=2"], "additional properties 'controler' not allowed"),
        (["--set", "webhook.replica=2"], "additional properties 'replica' not allowed"),
        (["--set", "logLevel=trace"], "at '/logLevel': value must be one of"),
        (["--set", "image.pullPolicy=Sometimes"], "at '/image/pullPolicy'"),
        (["--set", "webhook.urlOverride=http://127.0.0.1:9443"], "at '/webhook/urlOverride'"),
        (["--set", "certificates.mode=provided"], "at '/certificates/provided/existingSecret'"),
        (["--set", "watchNamespace=Not_A_Namespace"], "at '/watchNamespace'"),
        (["--set", "watchNamespace=trussium-system"], "watchNamespace must differ"),
    ],
)
def test_invalid_values_fail_with_the_offending_path(
    plane: ControlPlane, values: list[str], message: str
) -> None:
    assert message in render_error(plane, *values)


@pytest.mark.parametrize("mode", list(CERT_MODE_VALUES))
def test_each_certificate_mode_renders_and_the_api_server_accepts_it(
    plane: ControlPlane, namespace: str, mode: str
) -> None:
    release = release_name()
    objects = render(plane, release, namespace, "--include-crds", *CERT_MODE_VALUES[mode])
    in_cluster = [o for o in objects if o["apiVersion"].split("/")[0] not in NOT_IN_CLUSTER]
    plane.kubectl(
        "apply", "--dry-run=server", "-n", namespace, "-f", "-", input=as_list(in_cluster)
    )

    name = fullname(release)
    webhook = find(objects, "Deployment", f"{name}-webhook")
    args = container(webhook)["args"]
    volumes = {v["name"]: v for v in webhook["spec"]["template"]["spec"]["volumes"]}
    configs = [
        find(objects, kind, name)
        for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
    ]
    bundles = [h["clientConfig"].get("caBundle") for c in configs for h in c["webhooks"]]
    injection = {
        c["metadata"].get("annotations", {}).get("cert-manager.io/inject-ca-from") for c in configs
    }
    controller_args = container(find(objects, "Deployment", f"{name}-controller"))["args"]
    certificate_grants = {
        (o["kind"], o["metadata"]["name"])
        for o in objects
        if o["kind"] in ("Role", "ClusterRole")
        and any(word in o["metadata"]["name"] for word in ("certificate", "ca-injection"))
    }
    # Every mode: the webhook serves the mounted Secret's certificate and key, nothing else.
    assert "--cert-mode" not in " ".join(args)
    assert volumes["certs"]["secret"]["secretName"] == secret_name(mode, name)
    assert volumes["certs"]["secret"]["items"] == [
        {"key": "tls.crt", "path": "tls.crt"},
        {"key": "tls.key", "path": "tls.key"},
    ], "never the CA key of a Secret from before ADR 0029"
    if mode == "selfManaged":
        assert "--webhook-certificates" in controller_args
        assert flag(controller_args, "--webhook-secret-name") == f"{name}-webhook-tls"
        assert flag(controller_args, "--webhook-ca-secret-name") == f"{name}-webhook-ca"
        assert bundles == [None, None, None], "the controller injects caBundle"
        assert certificate_grants == {
            ("Role", f"{name}-controller-webhook-certificates"),
            ("ClusterRole", f"{name}-controller-webhook-ca-injection"),
        }, "granted to the controller, never to the webhook"
    else:
        assert not any(a.startswith("--webhook-") for a in controller_args)
        assert certificate_grants == set(), "only selfManaged mode writes Secrets"
    if mode == "certManager":
        certificate = find(objects, "Certificate", f"{name}-webhook")
        assert certificate["spec"]["secretName"] == volumes["certs"]["secret"]["secretName"]
        assert f"{name}-webhook.{namespace}.svc" in certificate["spec"]["dnsNames"]
        # The chain: self-signed Issuer -> CA Certificate -> CA Issuer -> serving Certificate.
        issuer = find(objects, "Issuer", certificate["spec"]["issuerRef"]["name"])
        ca = find(objects, "Certificate", f"{name}-webhook-ca")
        assert issuer["spec"] == {"ca": {"secretName": ca["spec"]["secretName"]}}
        assert ca["spec"]["isCA"] is True
        assert ca["spec"]["privateKey"]["rotationPolicy"] == "Never", "renewals keep the CA key"
        root = find(objects, "Issuer", ca["spec"]["issuerRef"]["name"])
        assert root["spec"] == {"selfSigned": {}}
        assert injection == {f"{namespace}/{name}-webhook-ca"}, "the CA is injected"
        assert bundles == [None, None, None]
    if mode == "provided":
        assert bundles == ["Q0EgYnVuZGxl"] * 3
        assert "Certificate" not in kinds(objects)


def test_chart_flags_are_accepted_by_the_programs_and_wire_the_names(
    plane: ControlPlane, namespace: str
) -> None:
    release = release_name()
    objects = render(plane, release, namespace)
    name = fullname(release)
    webhook = container(find(objects, "Deployment", f"{name}-webhook"))
    controller = container(find(objects, "Deployment", f"{name}-controller"))

    # The programs' own parsers accept exactly what the chart passes (argparse exits on an
    # unknown flag or a bad choice).
    served = webhook_parser().parse_args([*webhook["command"][1:], *webhook["args"]])
    ran = controller_parser().parse_args([*controller["command"][1:], *controller["args"]])
    assert webhook["command"][0] == "trussium-webhook"
    assert controller["command"][0] == "trussium-controller"

    assert ran.webhook_config_name == [name]
    find(objects, "MutatingWebhookConfiguration", name)
    find(objects, "ValidatingWebhookConfiguration", name)
    assert find(objects, "Service", ran.webhook_service_name)["spec"]["ports"][0] == {
        "name": "https",
        "port": 443,
        "targetPort": "https",
        "protocol": "TCP",
    }
    assert ran.webhook_namespace == namespace
    assert served.operator_username == f"system:serviceaccount:{namespace}:{name}-controller"
    assert find(objects, "ServiceAccount", f"{name}-controller")
    role = find(objects, "Role", f"{name}-controller-webhook-certificates")
    assert role["rules"][1]["resourceNames"] == [
        ran.webhook_secret_name,
        ran.webhook_ca_secret_name,
    ]

    assert ran.leader_elect is True
    assert ran.leader_election_namespace == namespace
    lease_role = find(objects, "Role", f"{name}-controller-leader-election")
    assert lease_role["rules"][1]["resourceNames"] == [ran.leader_election_id]
    assert ran.watch_namespace == ""


def test_pods_are_hardened_like_the_runtime(plane: ControlPlane, namespace: str) -> None:
    release = release_name()
    name = fullname(release)
    objects = render(plane, release, namespace)
    for component in ("controller", "webhook"):
        deployment = find(objects, "Deployment", f"{name}-{component}")
        pod = deployment["spec"]["template"]["spec"]
        assert pod["securityContext"] == {
            "runAsNonRoot": True,
            "runAsUser": 65532,
            "runAsGroup": 65532,
            "fsGroup": 65532,
            "seccompProfile": {"type": "RuntimeDefault"},
        }
        assert pod["enableServiceLinks"] is False
        # The webhook calls the API server only for secure metrics' access reviews (the
        # default) and the opt-in Secret lookup (tests/apiserver/test_chart_metrics.py).
        assert pod["automountServiceAccountToken"] is True
        assert pod["serviceAccountName"] == f"{name}-{component}"
        assert pod["topologySpreadConstraints"][0]["topologyKey"] == "kubernetes.io/hostname"
        main = container(deployment)
        assert main["securityContext"] == {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "privileged": False,
            "capabilities": {"drop": ["ALL"]},
        }
        assert main["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
        assert main["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
        assert {"requests", "limits"} <= main["resources"].keys()
        mounts = {m["mountPath"]: m["name"] for m in main["volumeMounts"]}
        volumes = {v["name"]: v for v in pod["volumes"]}
        assert "emptyDir" in volumes[mounts["/tmp"]]
    webhook = find(objects, "Deployment", f"{name}-webhook")
    assert webhook["spec"]["replicas"] == 2
    pdb = find(objects, "PodDisruptionBudget", f"{name}-webhook")
    assert pdb["spec"]["maxUnavailable"] == 1
    assert pdb["spec"]["selector"] == webhook["spec"]["selector"]


def test_admission_hooks_follow_the_contract(plane: ControlPlane, namespace: str) -> None:
    release = release_name()
    name = fullname(release)
    objects = render(plane, release, namespace)
    hooks = {
        hook["clientConfig"]["service"]["path"]: hook
        for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
        for hook in find(objects, kind, name)["webhooks"]
    }
    assert set(hooks) == {
        "/mutate-trussiumruntime",
        "/validate-trussiumruntime",
        "/validate-managed-deployment",
    }
    own_namespace = {
        "key": "kubernetes.io/metadata.name",
        "operator": "NotIn",
        "values": [namespace],
    }
    for path, hook in hooks.items():
        assert hook["sideEffects"] == "None"
        assert hook["timeoutSeconds"] == 5
        assert hook["matchPolicy"] == "Equivalent"
        assert hook["admissionReviewVersions"] == ["v1"]
        assert hook["namespaceSelector"]["matchExpressions"] == [own_namespace]
        assert hook["clientConfig"]["service"]["name"] == f"{name}-webhook"
        rule = hook["rules"][0]
        if path == "/validate-managed-deployment":
            assert hook["failurePolicy"] == "Ignore"
            assert (rule["apiGroups"], rule["resources"], rule["operations"]) == (
                ["apps"],
                ["deployments"],
                ["UPDATE"],
            )
            assert hook["objectSelector"] == {
                "matchLabels": {"app.kubernetes.io/managed-by": "trussium-operator"}
            }
        else:
            assert hook["failurePolicy"] == "Fail"
            assert (rule["apiGroups"], rule["apiVersions"], rule["resources"]) == (
                ["runtime.trussium.io"],
                ["v1alpha1"],
                ["trussiumruntimes"],
            )
            assert rule["operations"] == ["CREATE", "UPDATE"]


def test_rbac_is_the_contract_and_nothing_more(plane: ControlPlane, namespace: str) -> None:
    release = release_name()
    name = fullname(release)
    objects = render(plane, release, namespace)
    assert find(objects, "ClusterRole", f"{name}-controller")["rules"] == CONTROLLER_RULES
    webhook_grants = [
        o["kind"]
        for o in objects
        if o["metadata"]["name"] == f"{name}-webhook" and "Role" in o["kind"]
    ]
    assert webhook_grants == [], "no Secret listing unless webhook.secretLookup"
    assert (
        "--secret-lookup" not in container(find(objects, "Deployment", f"{name}-webhook"))["args"]
    )
    looking_up = render(plane, release, namespace, "--set", "webhook.secretLookup=true")
    assert find(looking_up, "ClusterRole", f"{name}-webhook")["rules"] == [
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["list"]}
    ]
    assert "--secret-lookup" in container(find(looking_up, "Deployment", f"{name}-webhook"))["args"]
    # Secret references are authorized for their requester (ADR 0034): one review each.
    assert find(objects, "ClusterRole", f"{name}-webhook-secret-references")["rules"] == [
        {
            "apiGroups": ["authorization.k8s.io"],
            "resources": ["subjectaccessreviews"],
            "verbs": ["create"],
        }
    ]
    unchecked = render(
        plane, release, namespace, "--set", "webhook.authorizeSecretReferences=false"
    )
    assert not [o for o in unchecked if o["metadata"]["name"].endswith("-secret-references")]
    assert (
        "--no-authorize-secret-references"
        in (container(find(unchecked, "Deployment", f"{name}-webhook"))["args"])
    )
    assert find(objects, "ClusterRole", f"{name}-controller-webhook-ca-injection")["rules"] == [
        {
            "apiGroups": ["admissionregistration.k8s.io"],
            "resources": ["mutatingwebhookconfigurations", "validatingwebhookconfigurations"],
            "resourceNames": [name],
            "verbs": ["get", "patch"],
        }
    ]
    every_resource = {
        r for o in objects if "rules" in o for rule in o["rules"] for r in rule.get("resources", [])
    }
    assert not every_resource & {"pods", "replicasets", "nodes", "*"}


def test_watch_namespace_turns_every_cluster_grant_into_a_role(
    plane: ControlPlane, namespace: str
) -> None:
    release = release_name()
    name = fullname(release)
    watched = f"{namespace}-apps"
    objects = render(
        plane,
        release,
        namespace,
        "--set",
        f"watchNamespace={watched}",
        "--set",
        "webhook.secretLookup=true",
    )
    controller_role = find(objects, "Role", f"{name}-controller")
    assert controller_role["metadata"]["namespace"] == watched
    assert controller_role["rules"] == CONTROLLER_RULES
    assert find(objects, "Role", f"{name}-webhook")["metadata"]["namespace"] == watched
    cluster_roles = [o["metadata"]["name"] for o in objects if o["kind"] == "ClusterRole"]
    # Besides its own configurations, only listing the Go operator's leader Lease by name,
    # in whatever namespace it runs (ADR 0030), and the metrics reviews and /metrics, which
    # no namespace holds (ADR 0026). The TrussiumRuntime access roles grant nothing until
    # someone binds them.
    lease_reader = f"{name}-controller-go-operator-lease"
    access = [f"{name}-trussiumruntime-{role}" for role in ("admin", "editor", "viewer")]
    metrics = [f"{name}-access-reviews", f"{name}-metrics-viewer"]
    injection = f"{name}-controller-webhook-ca-injection"
    secret_references = f"{name}-webhook-secret-references"
    assert sorted(cluster_roles) == sorted(
        [injection, lease_reader, *access, *metrics, secret_references]
    )
    assert find(objects, "ClusterRole", lease_reader)["rules"] == [
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "resourceNames": ["d4fd4c09.trussium.io"],
            "verbs": ["list"],
        }
    ]
    controller = container(find(objects, "Deployment", f"{name}-controller"))
    assert flag(controller["args"], "--watch-namespace") == watched
    for hook in find(objects, "ValidatingWebhookConfiguration", name)["webhooks"]:
        assert {"key": "kubernetes.io/metadata.name", "operator": "In", "values": [watched]} in (
            hook["namespaceSelector"]["matchExpressions"]
        )


def test_url_override_points_hooks_outside_the_cluster(plane: ControlPlane, namespace: str) -> None:
    release = release_name()
    name = fullname(release)
    objects = render(
        plane, release, namespace, "--set", "webhook.urlOverride=https://127.0.0.1:9443/"
    )
    urls = sorted(
        hook["clientConfig"]["url"]
        for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
        for hook in find(objects, kind, name)["webhooks"]
    )
    assert urls == [
        "https://127.0.0.1:9443/mutate-trussiumruntime",
        "https://127.0.0.1:9443/validate-managed-deployment",
        "https://127.0.0.1:9443/validate-trussiumruntime",
    ]
    assert {
        "Deployment/" + d["metadata"]["name"] for d in objects if d["kind"] == "Deployment"
    } == {f"Deployment/{name}-controller"}
    find(objects, "ServiceAccount", f"{name}-webhook")  # the outside process uses its token


def test_optional_objects_render_and_are_accepted(plane: ControlPlane, namespace: str) -> None:
    release = release_name()
    name = fullname(release)
    objects = render(
        plane,
        release,
        namespace,
        "--set",
        "networkPolicy.enabled=true",
        "--set",
        "metrics.serviceMonitor.enabled=true",
        "--set-json",
        'networkPolicy.metricsFrom=[{"namespaceSelector":{"matchLabels":{"m":"1"}}}]',
        "--set-json",
        'controller.podLabels={"team":"a","app.kubernetes.io/name":"x"}',
    )
    in_cluster = [o for o in objects if o["apiVersion"].split("/")[0] not in NOT_IN_CLUSTER]
    plane.kubectl(
        "apply", "--dry-run=server", "-n", namespace, "-f", "-", input=as_list(in_cluster)
    )
    monitor = find(objects, "ServiceMonitor", name)
    assert monitor["spec"]["endpoints"][0]["port"] == "metrics"
    controller_policy = find(objects, "NetworkPolicy", f"{name}-controller")
    assert controller_policy["spec"]["ingress"][0]["ports"] == [
        {"protocol": "TCP", "port": "metrics"}
    ]
    labels = find(objects, "Deployment", f"{name}-controller")["spec"]["template"]["metadata"]
    assert labels["labels"]["team"] == "a"
    assert labels["labels"]["app.kubernetes.io/name"] == "trussium-operator", "chart labels win"


def _get(plane: ControlPlane, *args: str) -> Any:
    return json.loads(plane.kubectl("get", "-o", "json", *args).stdout)


def test_install_upgrade_and_uninstall(plane: ControlPlane, namespace: str) -> None:
    install_crds(plane)
    release = release_name()
    name = fullname(release)
    helm = ("--namespace", namespace, "--wait", "--timeout", "180s")
    # Applied above, the CRD belongs to no release (tests/cluster/test_install_docs.py
    # has Helm own it), so it cannot be this one's.
    no_crd = ("--set", "crds.enabled=false")
    try:
        installed = plane.helm("install", release, str(CHART), *helm, *no_crd)
        assert "rollout status deployment/" in installed.stdout  # NOTES.txt
        for component, replicas in (("controller", 1), ("webhook", 2)):
            plane.kubectl(
                "wait",
                "-n",
                namespace,
                f"deployment/{name}-{component}",
                "--for=condition=Available",
                "--timeout=120s",
            )
            status = _get(plane, "-n", namespace, f"deployment/{name}-{component}")["status"]
            assert status["availableReplicas"] == replicas

        plane.helm(
            "upgrade",
            release,
            str(CHART),
            *helm,
            "--reset-then-reuse-values",
            "--set",
            "webhook.replicas=3",
            "--set",
            "logLevel=debug",
        )
        webhook = _get(plane, "-n", namespace, f"deployment/{name}-webhook")
        assert webhook["status"]["availableReplicas"] == 3
        assert "--log-level=debug" in container(webhook)["args"]
        assert webhook["status"]["updatedReplicas"] == 3
    finally:
        plane.helm("uninstall", release, "--namespace", namespace, "--wait", "--timeout", "120s")

    left = plane.kubectl(
        "get",
        "deployments,services,serviceaccounts,roles,rolebindings,pdb",
        "-n",
        namespace,
        "-l",
        f"app.kubernetes.io/instance={release}",
        "-o",
        "name",
    ).stdout
    assert left == ""
    for kind in ("mutatingwebhookconfiguration", "validatingwebhookconfiguration"):
        gone = plane.kubectl("get", kind, name, check=False)
        assert gone.returncode != 0
        assert "NotFound" in gone.stderr
    cluster_left = plane.kubectl(
        "get",
        "clusterroles,clusterrolebindings",
        "-o",
        "name",
        "-l",
        f"app.kubernetes.io/instance={release}",
    ).stdout
    assert cluster_left == ""
    # Not the release's (crds.enabled=false): the CRD, and every TrussiumRuntime, stay.
    plane.kubectl("get", "crd", "trussiumruntimes.runtime.trussium.io")
