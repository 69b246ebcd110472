"""Every field of the managed objects of docs/contract.md section 4."""

import copy
from typing import Any

import pytest

from trussium_operator.common.api import TrussiumRuntime
from trussium_operator.common.render import config_checksum
from trussium_operator.controller.runtime.kinds import disabled_kinds, render_managed_objects

UID = "6f1c3c8e-0000-4000-8000-000000000001"
BASE_SPEC: dict[str, Any] = {
    "image": {"repository": "ghcr.io/trussium/runtime", "tag": "1.4.0"},
    "provider": {"type": "openai", "model": "gpt-4o-mini"},
}
LABELS = {
    "app.kubernetes.io/name": "trussium",
    "app.kubernetes.io/instance": "demo",
    "app.kubernetes.io/component": "runtime",
    "app.kubernetes.io/managed-by": "trussium-operator",
}
SELECTOR = {"app.kubernetes.io/name": "trussium", "app.kubernetes.io/instance": "demo"}
OWNER = {
    "apiVersion": "runtime.trussium.io/v1alpha1",
    "kind": "TrussiumRuntime",
    "name": "demo",
    "uid": UID,
    "controller": True,
    "blockOwnerDeletion": True,
}
METADATA = {"name": "demo", "namespace": "prod", "labels": LABELS, "ownerReferences": [OWNER]}
TMPDIR = {"name": "TMPDIR", "value": "/tmp"}
BASE_DATA = {
    "TRUSSIUM_ENVIRONMENT": "production",
    "TRUSSIUM_RUNTIME__HOST": "0.0.0.0",
    "TRUSSIUM_RUNTIME__PORT": "9000",
    "TRUSSIUM_PROVIDER__NAME": "openai",
}


def runtime(uid: str = UID, **spec: Any) -> TrussiumRuntime:
    return TrussiumRuntime.model_validate(
        {
            "metadata": {"name": "demo", "namespace": "prod", "uid": uid, "generation": 1},
            "spec": {**copy.deepcopy(BASE_SPEC), **spec},
        }
    )


def objects(rt: TrussiumRuntime, live: dict[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    return {obj["kind"]: obj for obj in render_managed_objects(rt, live)}


def deployment(**spec: Any) -> dict[str, Any]:
    return objects(runtime(**spec))["Deployment"]


def pod_spec(**spec: Any) -> dict[str, Any]:
    pod: dict[str, Any] = deployment(**spec)["spec"]["template"]["spec"]
    return pod


def container(**spec: Any) -> dict[str, Any]:
    only: dict[str, Any] = pod_spec(**spec)["containers"][0]
    return only


def test_objects_come_in_apply_order_and_optional_ones_only_when_enabled() -> None:
    kinds = [obj["kind"] for obj in render_managed_objects(runtime())]
    assert kinds == ["ConfigMap", "ServiceAccount", "Service", "Deployment", "PodDisruptionBudget"]
    enabled = runtime(
        networkPolicy={"enabled": True, "ingress": [{"namespaceSelector": {}}]},
        autoscaling={"enabled": True},
        resources={"requests": {"cpu": "100m"}},
    )
    assert [obj["kind"] for obj in render_managed_objects(enabled)] == [
        *kinds,
        "NetworkPolicy",
        "HorizontalPodAutoscaler",
    ]


def test_every_object_has_identity_labels_and_a_controller_owner_reference() -> None:
    api_versions = {
        "ConfigMap": "v1",
        "ServiceAccount": "v1",
        "Service": "v1",
        "Deployment": "apps/v1",
        "PodDisruptionBudget": "policy/v1",
        "NetworkPolicy": "networking.k8s.io/v1",
        "HorizontalPodAutoscaler": "autoscaling/v2",
    }
    rt = runtime(
        networkPolicy={"enabled": True, "ingress": [{"namespaceSelector": {}}]},
        autoscaling={"enabled": True},
    )
    for obj in render_managed_objects(rt):
        assert obj["apiVersion"] == api_versions[obj["kind"]]
        assert obj["metadata"] == METADATA
        assert "status" not in obj


def test_owner_reference_leaves_out_an_unknown_uid() -> None:
    for obj in render_managed_objects(runtime(uid="")):
        owner = {key: value for key, value in OWNER.items() if key != "uid"}
        assert obj["metadata"]["ownerReferences"] == [owner]


def test_config_map_holds_the_always_present_keys() -> None:
    assert objects(runtime())["ConfigMap"] == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": METADATA,
        "data": BASE_DATA,
    }


def test_config_map_projects_optional_fields_only_when_set() -> None:
    rt = runtime(
        provider={"type": "ollama", "model": "llama3", "baseURL": "http://ollama:11434"},
        runtime={
            "providerRequestTimeoutSeconds": 120,
            "streamIdleTimeoutSeconds": 45,
            "shutdownDrainTimeoutSeconds": 20,
        },
    )
    assert objects(rt)["ConfigMap"]["data"] == {
        **BASE_DATA,
        "TRUSSIUM_PROVIDER__NAME": "ollama",
        "TRUSSIUM_PROVIDER__BASE_URL": "http://ollama:11434",
        "TRUSSIUM_TIMEOUTS__PROVIDER_REQUEST_SECONDS": "120",
        "TRUSSIUM_TIMEOUTS__STREAM_IDLE_SECONDS": "45",
        "TRUSSIUM_RUNTIME__GRACEFUL_SHUTDOWN_SECONDS": "20",
    }
    partial = runtime(runtime={"streamIdleTimeoutSeconds": 45})
    assert objects(partial)["ConfigMap"]["data"] == {
        **BASE_DATA,
        "TRUSSIUM_TIMEOUTS__STREAM_IDLE_SECONDS": "45",
    }


def test_container_port_is_projected_whatever_the_service_port() -> None:
    data = objects(runtime(service={"port": 8080}))["ConfigMap"]["data"]
    assert data["TRUSSIUM_RUNTIME__PORT"] == "9000"


def test_service_account_never_mounts_a_token_and_lists_pull_secrets_when_any() -> None:
    assert objects(runtime())["ServiceAccount"] == {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": METADATA,
        "automountServiceAccountToken": False,
    }
    rt = runtime(imagePullSecrets=[{"name": "registry-a"}, {"name": "registry-b"}])
    assert objects(rt)["ServiceAccount"]["imagePullSecrets"] == [
        {"name": "registry-a"},
        {"name": "registry-b"},
    ]


@pytest.mark.parametrize(
    ("service", "type_", "port"),
    [({}, "ClusterIP", 9000), ({"type": "NodePort", "port": 80}, "NodePort", 80)],
)
def test_service_exposes_one_http_port(service: dict[str, Any], type_: str, port: int) -> None:
    assert objects(runtime(service=service))["Service"] == {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": METADATA,
        "spec": {
            "type": type_,
            "selector": SELECTOR,
            "ports": [{"name": "http", "protocol": "TCP", "port": port, "targetPort": "http"}],
        },
    }


def test_minimal_deployment_carries_the_whole_workload_contract() -> None:
    probe = {"httpGet": {"path": "/health/live", "port": "http"}}
    assert deployment() == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": METADATA,
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": SELECTOR},
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1},
            },
            "progressDeadlineSeconds": 600,
            "revisionHistoryLimit": 3,
            "template": {
                "metadata": {
                    "labels": LABELS,
                    "annotations": {
                        "runtime.trussium.io/config-checksum": config_checksum(BASE_DATA)
                    },
                },
                "spec": {
                    "serviceAccountName": "demo",
                    "automountServiceAccountToken": False,
                    "enableServiceLinks": False,
                    "terminationGracePeriodSeconds": 36,
                    "securityContext": {
                        "runAsNonRoot": True,
                        "runAsUser": 10001,
                        "runAsGroup": 10001,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "topologySpreadConstraints": [
                        {
                            "maxSkew": 1,
                            "topologyKey": "kubernetes.io/hostname",
                            "whenUnsatisfiable": "ScheduleAnyway",
                            "labelSelector": {"matchLabels": SELECTOR},
                        }
                    ],
                    "containers": [
                        {
                            "name": "trussium",
                            "image": "ghcr.io/trussium/runtime:1.4.0",
                            "imagePullPolicy": "IfNotPresent",
                            "ports": [{"name": "http", "containerPort": 9000, "protocol": "TCP"}],
                            "envFrom": [{"configMapRef": {"name": "demo"}}],
                            "env": [TMPDIR],
                            "volumeMounts": [{"name": "scratch", "mountPath": "/tmp"}],
                            "securityContext": {
                                "allowPrivilegeEscalation": False,
                                "readOnlyRootFilesystem": True,
                                "capabilities": {"drop": ["ALL"]},
                            },
                            "startupProbe": {
                                **probe,
                                "periodSeconds": 2,
                                "timeoutSeconds": 1,
                                "failureThreshold": 30,
                            },
                            "livenessProbe": {
                                **probe,
                                "periodSeconds": 10,
                                "timeoutSeconds": 2,
                                "failureThreshold": 3,
                            },
                            "readinessProbe": {
                                "httpGet": {"path": "/health/ready", "port": "http"},
                                "periodSeconds": 5,
                                "timeoutSeconds": 2,
                                "failureThreshold": 3,
                            },
                        }
                    ],
                    "volumes": [{"name": "scratch", "emptyDir": {"sizeLimit": "1Gi"}}],
                },
            },
        },
    }


def test_digest_image_and_pull_policy() -> None:
    digest = "sha256:" + "ab" * 32
    only = container(
        image={"repository": "registry.local:5000/rt", "digest": digest, "pullPolicy": "Always"}
    )
    assert only["image"] == f"registry.local:5000/rt@{digest}"
    assert only["imagePullPolicy"] == "Always"


def test_credentials_come_from_the_secret_by_reference() -> None:
    only = container(
        provider={
            "type": "openai",
            "model": "m",
            "credentialsSecretRef": {"name": "openai-key", "key": "api-key"},
        }
    )
    assert only["env"] == [
        {
            "name": "TRUSSIUM_PROVIDER__API_KEY",
            "valueFrom": {"secretKeyRef": {"name": "openai-key", "key": "api-key"}},
        },
        TMPDIR,
    ]


def test_resources_are_copied_from_the_spec() -> None:
    resources = {"requests": {"cpu": "250m", "memory": "256Mi"}, "limits": {"memory": "1Gi"}}
    assert container(resources=resources)["resources"] == resources


def test_resource_claims_reach_the_container_unchanged() -> None:
    resources = {"claims": [{"name": "gpu"}, {"name": "nic", "request": "fast"}]}
    assert container(resources=resources)["resources"] == resources


@pytest.mark.parametrize(
    ("spec", "size"),
    [
        ({}, "1Gi"),
        ({"scratch": {}}, "1Gi"),
        ({"scratch": {"sizeLimit": "256Mi"}}, "256Mi"),
        ({"scratch": {"sizeLimit": 2**31}}, 2**31),
        # Capped at a lower ephemeral-storage limit, kept below a higher one.
        ({"resources": {"limits": {"ephemeral-storage": "500M"}}}, "500M"),
        ({"resources": {"limits": {"ephemeral-storage": "2Gi"}}}, "1Gi"),
        ({"resources": {"limits": {"ephemeral-storage": "1Gi"}}}, "1Gi"),
        ({"resources": {"requests": {"ephemeral-storage": "100Mi"}}}, "1Gi"),
        (
            {
                "scratch": {"sizeLimit": "64Mi"},
                "resources": {"limits": {"ephemeral-storage": "100Mi"}},
            },
            "64Mi",
        ),
    ],
)
def test_scratch_is_an_empty_dir_at_tmp_named_by_tmpdir(spec: dict[str, Any], size: object) -> None:
    pod = pod_spec(**spec)
    assert pod["volumes"] == [{"name": "scratch", "emptyDir": {"sizeLimit": size}}]
    (only,) = pod["containers"]
    assert only["volumeMounts"] == [{"name": "scratch", "mountPath": "/tmp"}]
    assert only["env"] == [TMPDIR]
    assert only["securityContext"]["readOnlyRootFilesystem"] is True


def test_the_scratch_size_leaves_the_checksum_alone() -> None:
    """The ConfigMap data alone makes the checksum (docs/contract.md section 12)."""
    checksums = {
        deployment(**spec)["spec"]["template"]["metadata"]["annotations"][
            "runtime.trussium.io/config-checksum"
        ]
        for spec in ({}, {"scratch": {"sizeLimit": "64Mi"}})
    }
    assert checksums == {config_checksum(BASE_DATA)}


@pytest.mark.parametrize(("drain", "grace"), [(None, 36), (1, 7), (30, 36), (3600, 3606)])
def test_termination_grace_is_drain_plus_six_seconds(drain: int | None, grace: int) -> None:
    tuning = {} if drain is None else {"shutdownDrainTimeoutSeconds": drain}
    assert pod_spec(runtime=tuning)["terminationGracePeriodSeconds"] == grace


def test_scheduling_and_pull_secrets_reach_the_pod_and_spread_stays() -> None:
    affinity = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "zone"}
            ]
        }
    }
    tolerations = [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]
    pod = pod_spec(
        imagePullSecrets=[{"name": "registry"}],
        scheduling={
            "nodeSelector": {"disk": "ssd"},
            "tolerations": tolerations,
            "affinity": affinity,
        },
    )
    assert pod["imagePullSecrets"] == [{"name": "registry"}]
    assert pod["nodeSelector"] == {"disk": "ssd"}
    assert pod["tolerations"] == tolerations
    assert pod["affinity"] == affinity
    assert pod["topologySpreadConstraints"][0]["labelSelector"] == {"matchLabels": SELECTOR}


def test_operator_labels_win_over_pod_metadata_and_user_labels_are_kept() -> None:
    template = deployment(
        podMetadata={
            "labels": {"team": "ml", "app.kubernetes.io/name": "evil"},
            "annotations": {"prometheus.io/scrape": "true"},
        }
    )["spec"]["template"]["metadata"]
    assert template["labels"] == {**LABELS, "team": "ml"}
    assert template["annotations"] == {
        "prometheus.io/scrape": "true",
        "runtime.trussium.io/config-checksum": config_checksum(BASE_DATA),
    }


def test_a_user_checksum_annotation_is_ignored() -> None:
    annotations = deployment(
        podMetadata={"annotations": {"runtime.trussium.io/config-checksum": "forged"}}
    )["spec"]["template"]["metadata"]["annotations"]
    assert annotations == {"runtime.trussium.io/config-checksum": config_checksum(BASE_DATA)}


def test_checksum_follows_the_config_map_and_nothing_else() -> None:
    def checksum(**spec: Any) -> str:
        value: str = deployment(**spec)["spec"]["template"]["metadata"]["annotations"][
            "runtime.trussium.io/config-checksum"
        ]
        return value

    base = checksum()
    assert checksum(provider={"type": "openai", "model": "another-model"}) == base
    assert checksum(replicas=3) == base
    assert checksum(runtime={"streamIdleTimeoutSeconds": 5}) != base
    assert checksum(provider={"type": "ollama", "model": "gpt-4o-mini"}) != base


AUTOSCALING = {"enabled": True, "minReplicas": 2, "maxReplicas": 5}


@pytest.mark.parametrize(
    ("spec", "live", "replicas"),
    [
        ({}, None, 1),
        ({"replicas": 0}, None, 0),
        ({"replicas": 4}, {"spec": {"replicas": 9}}, 4),
        ({"autoscaling": AUTOSCALING}, None, 2),
        ({"autoscaling": AUTOSCALING, "replicas": 4}, None, 2),
        ({"autoscaling": AUTOSCALING}, {"spec": {"replicas": 7}}, 7),
    ],
    ids=["default", "zero", "spec-wins", "hpa-create", "hpa-ignores-spec", "hpa-keeps-live"],
)
def test_replicas(spec: dict[str, Any], live: dict[str, Any] | None, replicas: int) -> None:
    assert objects(runtime(**spec), live)["Deployment"]["spec"]["replicas"] == replicas


def test_pod_disruption_budget_allows_one_unavailable_and_never_blocks_on_unready_pods() -> None:
    assert objects(runtime())["PodDisruptionBudget"] == {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": METADATA,
        "spec": {
            "maxUnavailable": 1,
            "selector": {"matchLabels": SELECTOR},
            "unhealthyPodEvictionPolicy": "AlwaysAllow",
        },
    }


def test_network_policy_has_one_rule_per_ingress_entry_and_no_egress() -> None:
    monitoring = {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}
    gateway = {"matchExpressions": [{"key": "role", "operator": "In", "values": ["gateway"]}]}
    rt = runtime(
        networkPolicy={
            "enabled": True,
            "ingress": [
                {"namespaceSelector": monitoring},
                {"namespaceSelector": {}, "podSelector": gateway},
            ],
        }
    )
    port = [{"protocol": "TCP", "port": 9000}]
    assert objects(rt)["NetworkPolicy"] == {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": METADATA,
        "spec": {
            "podSelector": {"matchLabels": SELECTOR},
            "policyTypes": ["Ingress"],
            "ingress": [
                {"from": [{"namespaceSelector": monitoring}], "ports": port},
                {"from": [{"namespaceSelector": {}, "podSelector": gateway}], "ports": port},
            ],
        },
    }


def test_autoscaler_targets_the_deployment_on_cpu_utilization() -> None:
    rt = runtime(
        autoscaling={**AUTOSCALING, "targetCPUUtilizationPercentage": 65},
        resources={"requests": {"cpu": "100m"}},
    )
    assert objects(rt)["HorizontalPodAutoscaler"] == {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": METADATA,
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "demo"},
            "minReplicas": 2,
            "maxReplicas": 5,
            "metrics": [
                {
                    "type": "Resource",
                    "resource": {
                        "name": "cpu",
                        "target": {"type": "Utilization", "averageUtilization": 65},
                    },
                }
            ],
        },
    }


NETWORK_POLICY = ("networking.k8s.io/v1", "NetworkPolicy")
AUTOSCALER = ("autoscaling/v2", "HorizontalPodAutoscaler")
POD_MONITOR = ("monitoring.coreos.com/v1", "PodMonitor")


@pytest.mark.parametrize(
    ("spec", "disabled"),
    [
        ({}, [NETWORK_POLICY, AUTOSCALER, POD_MONITOR]),
        (
            {"networkPolicy": {"enabled": False}, "autoscaling": {"enabled": False}},
            [NETWORK_POLICY, AUTOSCALER, POD_MONITOR],
        ),
        (
            {"networkPolicy": {"enabled": True, "ingress": [{"namespaceSelector": {}}]}},
            [AUTOSCALER, POD_MONITOR],
        ),
        ({"autoscaling": {"enabled": True}}, [NETWORK_POLICY, POD_MONITOR]),
        ({"observability": {"monitor": {"enabled": True}}}, [NETWORK_POLICY, AUTOSCALER]),
    ],
)
def test_disabled_optional_objects_are_the_ones_to_delete(
    spec: dict[str, Any], disabled: list[tuple[str, str]]
) -> None:
    rt = runtime(**spec)
    assert [(k.resource.api_version, k.kind) for k in disabled_kinds(rt)] == disabled
    rendered = {(o["apiVersion"], o["kind"]) for o in render_managed_objects(rt)}
    assert not rendered & set(disabled)
