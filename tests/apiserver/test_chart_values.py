"""The chart's escape hatches and umbrella-chart keys: each value renders where
a platform engineer expects it, the API server accepts the result (server-side
dry-run), and the schema refuses what the API server or the contract would."""

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from devcluster import ControlPlane
from tests.support.chart import (
    CHART,
    accepted,
    container,
    find,
    fullname,
    release_name,
    render,
    render_error,
)
from trussium_operator.controller.cli import parser as controller_parser
from trussium_operator.controller.manager import SHUTDOWN_GRACE_SECONDS
from trussium_operator.serving.limits import DEFAULT_MEMORY_BUDGET_BYTES
from trussium_operator.webhook.cli import build_parser as webhook_parser

pytestmark = pytest.mark.api

OWN_NAMESPACE_KEY = "kubernetes.io/metadata.name"

ESCAPE_HATCHES: dict[str, Any] = {
    "controller": {
        "terminationGracePeriodSeconds": 90,
        "extraArgs": ["--log-level=debug", "--workers=8"],
        "kubeApiQPS": 50.5,
        "kubeApiBurst": 100,
        "extraEnv": [
            {"name": "HTTPS_PROXY", "value": "http://proxy.example:3128"},
            {
                "name": "NODE_NAME",
                "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}},
            },
        ],
        "extraVolumes": [{"name": "ca-certs", "configMap": {"name": "corporate-ca"}}],
        "extraVolumeMounts": [
            {"name": "ca-certs", "mountPath": "/etc/ssl/corporate", "readOnly": True}
        ],
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "DoNotSchedule",
            }
        ],
        "securityContext": {"readOnlyRootFilesystem": True, "runAsUser": 1001},
    },
    "webhook": {
        "port": 10250,
        "healthPort": 10251,
        "hostNetwork": True,
        "extraArgs": ["--shutdown-delay=8"],
        "memoryBudgetMiB": 48,
        "extraEnv": [{"name": "TZ", "value": "UTC"}],
        "extraVolumes": [{"name": "scratch", "emptyDir": {}}],
        "extraVolumeMounts": [{"name": "scratch", "mountPath": "/scratch"}],
        "topologySpreadConstraints": [],
        "runtimeHooks": {
            "failurePolicy": "Ignore",
            "timeoutSeconds": 3,
            "namespaceSelector": {"matchLabels": {"trussium.io/admission": "enabled"}},
            "objectSelector": {
                "matchExpressions": [{"key": "skip-admission", "operator": "DoesNotExist"}]
            },
        },
        "deploymentGuard": {
            "failurePolicy": "Fail",
            "timeoutSeconds": 2,
            "namespaceSelector": {
                "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["sandbox"]}]
            },
            "objectSelector": {
                "matchLabels": {
                    "team": "ml",
                    "app.kubernetes.io/managed-by": "someone-else",
                }
            },
        },
    },
    "metrics": {
        "serviceMonitor": {
            "enabled": True,
            "namespace": "monitoring",  # where the webhook's CA is not: its own copy
            "tlsConfig": {
                "ca": {"configMap": {"name": "trussium-ca", "key": "ca.crt"}},
                "serverName": "trussium-operator-webhook.trussium-system.svc",
            },
            "scrapeTimeout": "10s",
            "relabelings": [{"targetLabel": "cluster", "replacement": "eu-1"}],
            "metricRelabelings": [
                {
                    "sourceLabels": ["__name__"],
                    "regex": "workqueue_.*",
                    "action": "drop",
                }
            ],
        }
    },
}


def _values_file(tmp_path: Path, values: dict[str, Any]) -> str:
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    return str(path)


def _hooks(objects: list[dict[str, Any]], name: str) -> dict[str, dict[str, Any]]:
    return {
        hook["name"]: hook
        for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
        for hook in find(objects, kind, name)["webhooks"]
    }


def test_escape_hatches_render_where_expected_and_are_accepted(
    plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    release = release_name()
    name = fullname(release)
    objects = render(plane, release, namespace, "-f", _values_file(tmp_path, ESCAPE_HATCHES))
    accepted(plane, namespace, objects)

    controller = find(objects, "Deployment", f"{name}-controller")["spec"]["template"]["spec"]
    main = container({"spec": {"template": {"spec": controller}}})
    assert controller["terminationGracePeriodSeconds"] == 90
    ran = controller_parser().parse_args([*main["command"][1:], *main["args"]])
    assert ran.workers == 8, "a flag repeated in extraArgs wins"
    assert ran.log_level == "debug"
    assert (ran.kube_api_qps, ran.kube_api_burst) == (50.5, 100)
    env = {e["name"]: e for e in main["env"]}
    assert set(env) == {"POD_NAME", "HTTPS_PROXY", "NODE_NAME"}
    assert {"name": "ca-certs", "mountPath": "/etc/ssl/corporate", "readOnly": True} in main[
        "volumeMounts"
    ]
    assert {"name": "ca-certs", "configMap": {"name": "corporate-ca"}} in controller["volumes"]
    assert {v["name"] for v in controller["volumes"]} == {"tmp", "metrics-certs", "ca-certs"}
    (spread,) = controller["topologySpreadConstraints"]
    assert spread["topologyKey"] == "topology.kubernetes.io/zone"
    assert spread["labelSelector"]["matchLabels"]["app.kubernetes.io/component"] == "controller"
    assert main["securityContext"]["runAsUser"] == 1001
    assert main["securityContext"]["capabilities"] == {"drop": ["ALL"]}, "defaults kept"

    webhook = find(objects, "Deployment", f"{name}-webhook")["spec"]["template"]["spec"]
    served_container = container({"spec": {"template": {"spec": webhook}}})
    served = webhook_parser().parse_args(
        [*served_container["command"][1:], *served_container["args"]]
    )
    assert served.bind_address == "0.0.0.0:10250"
    assert served.health_bind_address == "0.0.0.0:10251"
    assert served.shutdown_delay == 8
    assert served.memory_budget_bytes == 48 * 1024 * 1024
    ports = {p["name"]: p["containerPort"] for p in served_container["ports"]}
    assert ports == {"https": 10250, "health": 10251, "metrics": 8443}
    assert webhook["hostNetwork"] is True
    assert webhook["dnsPolicy"] == "ClusterFirstWithHostNet"
    assert "topologySpreadConstraints" not in webhook, "an empty list spreads nothing"
    assert served_container["env"] == [{"name": "TZ", "value": "UTC"}]
    assert {"name": "scratch", "mountPath": "/scratch"} in served_container["volumeMounts"]
    service = find(objects, "Service", f"{name}-webhook")
    assert service["spec"]["ports"][0] == {
        "name": "https",
        "port": 443,
        "targetPort": "https",
        "protocol": "TCP",
    }

    hooks = _hooks(objects, name)
    own = {"key": OWN_NAMESPACE_KEY, "operator": "NotIn", "values": [namespace]}
    for hook_name in (
        "default.trussiumruntimes.runtime.trussium.io",
        "validate.trussiumruntimes.runtime.trussium.io",
    ):
        hook = hooks[hook_name]
        assert hook["failurePolicy"] == "Ignore"
        assert hook["timeoutSeconds"] == 3
        assert hook["namespaceSelector"] == {
            "matchLabels": {"trussium.io/admission": "enabled"},
            "matchExpressions": [own],
        }
        assert hook["objectSelector"] == {
            "matchExpressions": [{"key": "skip-admission", "operator": "DoesNotExist"}]
        }
    guard = hooks["guard.deployments.runtime.trussium.io"]
    assert guard["failurePolicy"] == "Fail"
    assert guard["timeoutSeconds"] == 2
    assert guard["namespaceSelector"]["matchExpressions"] == [
        own,
        {"key": "tier", "operator": "NotIn", "values": ["sandbox"]},
    ]
    assert guard["objectSelector"] == {
        "matchLabels": {"app.kubernetes.io/managed-by": "trussium-operator", "team": "ml"}
    }, "the guard only ever applies to the operator's own Deployments"

    monitor = find(objects, "ServiceMonitor", name)
    assert monitor["metadata"]["namespace"] == "monitoring"
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": [namespace]}
    endpoint = monitor["spec"]["endpoints"][0]
    assert endpoint["scrapeTimeout"] == "10s"
    assert endpoint["tlsConfig"] == ESCAPE_HATCHES["metrics"]["serviceMonitor"]["tlsConfig"]
    assert endpoint["relabelings"] == ESCAPE_HATCHES["metrics"]["serviceMonitor"]["relabelings"]
    assert endpoint["metricRelabelings"][0]["action"] == "drop"


def test_defaults_keep_the_hardening_and_outlast_each_programs_shutdown(
    plane: ControlPlane, namespace: str
) -> None:
    release = release_name()
    name = fullname(release)
    objects = render(plane, release, namespace)
    controller = find(objects, "Deployment", f"{name}-controller")["spec"]["template"]["spec"]
    webhook = find(objects, "Deployment", f"{name}-webhook")["spec"]["template"]["spec"]

    assert controller["terminationGracePeriodSeconds"] == 60
    main = container({"spec": {"template": {"spec": controller}}})
    ran = controller_parser().parse_args([*main["command"][1:], *main["args"]])
    assert (ran.kube_api_qps, ran.kube_api_burst) == (0.0, 30), "no client-side limit"
    assert controller["terminationGracePeriodSeconds"] > SHUTDOWN_GRACE_SECONDS
    served_container = container({"spec": {"template": {"spec": webhook}}})
    served = webhook_parser().parse_args(
        [*served_container["command"][1:], *served_container["args"]]
    )
    assert webhook["terminationGracePeriodSeconds"] == 30
    assert webhook["terminationGracePeriodSeconds"] > served.shutdown_delay + (
        served.shutdown_timeout
    )
    assert served.memory_budget_bytes == DEFAULT_MEMORY_BUDGET_BYTES
    assert "hostNetwork" not in webhook
    assert "dnsPolicy" not in webhook
    for pod in (controller, webhook):
        (spread,) = pod["topologySpreadConstraints"]
        assert spread["topologyKey"] == "kubernetes.io/hostname"
        assert spread["whenUnsatisfiable"] == "ScheduleAnyway"
        assert spread["labelSelector"]["matchLabels"]["app.kubernetes.io/instance"] == release
    assert [
        (h["failurePolicy"], h["timeoutSeconds"], "objectSelector" in h)
        for h in _hooks(objects, name).values()
    ] == [("Fail", 5, False), ("Fail", 5, False), ("Ignore", 5, True)]


def test_openshift_can_leave_the_uids_to_the_platform(
    plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    """Null removes a default key (Helm's rule); the restricted SCC then assigns the uid."""
    release = release_name()
    name = fullname(release)
    unset = {"runAsUser": None, "runAsGroup": None, "fsGroup": None}
    values = {
        "controller": {"podSecurityContext": unset},
        "webhook": {"podSecurityContext": unset},
    }
    objects = render(plane, release, namespace, "-f", _values_file(tmp_path, values))
    accepted(plane, namespace, objects)
    for component in ("controller", "webhook"):
        pod = find(objects, "Deployment", f"{name}-{component}")["spec"]["template"]["spec"]
        assert pod["securityContext"] == {
            "runAsNonRoot": True,
            "seccompProfile": {"type": "RuntimeDefault"},
        }
    on_command_line = render(
        plane, release, namespace, "--set", "controller.podSecurityContext.runAsUser=null"
    )
    pod = find(on_command_line, "Deployment", f"{name}-controller")["spec"]["template"]["spec"]
    assert "runAsUser" not in pod["securityContext"]
    assert pod["securityContext"]["runAsGroup"] == 65532


def test_an_umbrella_chart_can_depend_on_the_chart(
    plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    """The layout Argo CD and Flux users build: a parent chart with `global` values."""
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    parent = tmp_path / "platform"
    (parent / "charts").mkdir(parents=True)
    shutil.copytree(CHART, parent / "charts" / chart["name"])
    (parent / "Chart.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v2",
                "name": "platform",
                "version": "1.0.0",
                "dependencies": [
                    {
                        "name": chart["name"],
                        "version": chart["version"],
                        "condition": f"{chart['name']}.enabled",
                    }
                ],
            }
        )
    )
    (parent / "values.yaml").write_text(
        yaml.safe_dump(
            {
                "global": {"imageRegistry": "registry.example", "clusterName": "eu-1"},
                chart["name"]: {"enabled": True, "webhook": {"replicas": 3}},
            }
        )
    )
    out = plane.helm("template", "platform", str(parent), "--namespace", namespace).stdout
    objects = [doc for doc in yaml.safe_load_all(out) if doc]
    webhook = find(objects, "Deployment", "platform-trussium-operator-webhook")
    assert webhook["spec"]["replicas"] == 3
    assert container(webhook)["image"].startswith("registry.example/trussiumhq/"), (
        "the umbrella's global.imageRegistry is read"
    )

    disabled = plane.helm(
        "template", "platform", str(parent), "--set", f"{chart['name']}.enabled=false"
    ).stdout
    assert "kind: Deployment" not in disabled


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (
            ["--set", "webhook.runtimeHooks.timeoutSeconds=6"],
            "/webhook/runtimeHooks/timeoutSeconds",
        ),
        (["--set", "webhook.deploymentGuard.failurePolicy=Maybe"], "/failurePolicy"),
        (["--set", "webhook.runtimeHooks.objectSelecter.x=y"], "'objectSelecter' not allowed"),
        (["--set", "webhook.port=0"], "at '/webhook/port': minimum"),
        (["--set", "webhook.port=8081"], "webhook.port and webhook.healthPort must differ"),
        (["--set-json", 'controller.extraEnv=[{"value":"x"}]'], "missing property 'name'"),
        (["--set-json", 'webhook.extraVolumeMounts=[{"name":"x"}]'], "'mountPath'"),
        (["--set", "controller.terminationGracePeriodSeconds=-1"], "minimum"),
        (["--set", "controller.extraArgs[0]="], "/controller/extraArgs/0"),
        (["--set", "metrics.serviceMonitor.scrapeTimeout=10"], "scrapeTimeout"),
        (["--set", "prometheusRule.alerts.TrussiumWebhookDwn.for=1m"], "'TrussiumWebhookDwn'"),
        (["--set", "prometheusRule.alerts.TrussiumWebhookErrors.ratio=2"], "maximum"),
        (["--set", "enabled=maybe"], "at '/enabled'"),
        (
            ["--set", "controller.serviceAccount.create=false"],
            "controller.serviceAccount.name is required when controller.serviceAccount.create",
        ),
        (["--set", "webhook.podDisruptionBudget.maxUnavailable=-1"], "maxUnavailable"),
        (["--set", "webhook.podDisruptionBudget.minAvailable=half"], "minAvailable"),
        (["--set", "controller.strategy.type=BlueGreen"], "/controller/strategy/type"),
        (["--set", "controller.revisionHistoryLimit=-1"], "revisionHistoryLimit"),
        (["--set", "controller.livenessProbe.periodSeconds=0"], "periodSeconds"),
        (["--set-json", 'commonLabels={"team":{"a":1}}'], "/commonLabels/team"),
        (["--set", "global.imageRegistry=bad registry"], "imageRegistry"),
        (["--set-json", 'global.imagePullSecrets=["mirror"]'], "imagePullSecrets"),
        (["--set", "crds.keep=maybe"], "/crds/keep"),
    ],
)
def test_schema_refuses_bad_escape_hatch_values(
    plane: ControlPlane, values: list[str], message: str
) -> None:
    assert message in render_error(plane, *values)


def test_every_new_value_has_a_schema_description() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    components = schema["properties"]
    hatches = {
        "controller": [
            "terminationGracePeriodSeconds",
            "podSecurityContext",
            "securityContext",
            "topologySpreadConstraints",
            "extraArgs",
            "extraEnv",
            "extraVolumes",
            "extraVolumeMounts",
        ],
    }
    hatches["webhook"] = [
        *hatches["controller"],
        "port",
        "healthPort",
        "hostNetwork",
        "runtimeHooks",
        "deploymentGuard",
        "memoryBudgetMiB",
    ]
    hatches["controller"] += ["kubeApiQPS", "kubeApiBurst"]
    for component in ("controller", "webhook"):
        hatches[component] += [
            "strategy",
            "revisionHistoryLimit",
            "serviceAccount",
            "podDisruptionBudget",
            "livenessProbe",
            "readinessProbe",
            "nodeSelector",
        ]
    missing = [
        f"{component}.{key}"
        for component, keys in hatches.items()
        for key in keys
        if not components[component]["properties"][key].get("description")
    ]
    monitor = components["metrics"]["properties"]["serviceMonitor"]["properties"]
    missing += [
        f"metrics.serviceMonitor.{key}"
        for key in ("namespace", "scrapeTimeout", "relabelings", "metricRelabelings")
        if not monitor[key].get("description")
    ]
    hook = schema["definitions"]["hook"]["properties"]
    missing += [f"hook.{key}" for key, spec in hook.items() if not spec.get("description")]
    missing += [
        key
        for key in ("global", "enabled", "commonLabels", "crds")
        if not components[key].get("description")
    ]
    nested = {
        "global": ("imageRegistry", "imagePullSecrets"),
        "crds": ("enabled", "keep"),
        "image": ("registry",),
    }
    missing += [
        f"{key}.{sub}"
        for key, subs in nested.items()
        for sub in subs
        if not components[key]["properties"][sub].get("description")
    ]
    assert missing == []


def test_cert_manager_with_your_issuer_builds_no_chain(plane: ControlPlane, namespace: str) -> None:
    release = release_name()
    name = fullname(release)
    objects = render(
        plane,
        release,
        namespace,
        "--set",
        "certificates.mode=certManager",
        "--set",
        "certificates.certManager.issuerRef.name=corporate-ca",
        "--set",
        "certificates.certManager.issuerRef.kind=ClusterIssuer",
    )
    certificates = [o for o in objects if o["kind"] in ("Certificate", "Issuer")]
    assert [(o["kind"], o["metadata"]["name"]) for o in certificates] == [
        ("Certificate", f"{name}-webhook")
    ]
    assert certificates[0]["spec"]["issuerRef"] == {
        "name": "corporate-ca",
        "kind": "ClusterIssuer",
        "group": "cert-manager.io",
    }
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        annotations = find(objects, kind, name)["metadata"]["annotations"]
        assert annotations == {"cert-manager.io/inject-ca-from": f"{namespace}/{name}-webhook"}


@pytest.mark.parametrize(
    ("cluster", "installs"),
    [("v1.31.14", False), ("v1.32.9-eks-3", True), ("v1.32.0", True), ("v1.40.1-gke.100", True)],
)
def test_the_chart_installs_from_the_oldest_proven_minor(
    plane: ControlPlane, cluster: str, installs: bool
) -> None:
    """Helm refuses a cluster older than the oldest minor the suite runs on
    (docs/kubernetes-versions.md), managed clusters' version suffixes included."""
    args = ("template", "probe", str(CHART), "--kube-version", cluster)
    rendered = plane.helm(*args, check=False)
    assert (rendered.returncode == 0) is installs, rendered.stderr
    if not installs:
        assert "chart requires kubeVersion: >=1.32.0-0" in rendered.stderr
