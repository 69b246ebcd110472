"""The rendered manifests are valid Kubernetes objects that server-side apply converges.

On the real API server (api profile): every object is accepted, and applying
the same manifests again changes nothing, so the operator's field set never
fights the server's defaults.
"""

import json
from typing import Any

import pytest

from tests.conftest import Kubectl
from tests.pure.test_runtime_settings import EVERY_SETTING
from trussium_operator.common.api import TrussiumRuntime
from trussium_operator.controller.runtime.kinds import render_managed_objects

SPEC: dict[str, Any] = {
    "image": {"repository": "ghcr.io/trussium/runtime", "tag": "1.4.0"},
    "replicas": 2,
    "imagePullSecrets": [{"name": "registry"}],
    "provider": {
        "type": "openai",
        "model": "gpt-4o-mini",
        "baseURL": "https://api.openai.example/v1",
        "credentialsSecretRef": {"name": "openai", "key": "api-key"},
    },
    "runtime": {"providerRequestTimeoutSeconds": 60, "shutdownDrainTimeoutSeconds": 20},
    "service": {"type": "NodePort", "port": 8080},
    "networkPolicy": {
        "enabled": True,
        "ingress": [
            {"namespaceSelector": {"matchLabels": {"team": "web"}}},
            {
                "namespaceSelector": {},
                "podSelector": {
                    "matchExpressions": [{"key": "role", "operator": "In", "values": ["gw"]}]
                },
            },
        ],
    },
    "autoscaling": {"enabled": True, "minReplicas": 2, "maxReplicas": 4},
    "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "1Gi"}},
    "podMetadata": {"labels": {"team": "ml"}, "annotations": {"example.com/owner": "ml"}},
    "scheduling": {
        "nodeSelector": {"disk": "ssd"},
        "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "affinity": {
            "nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 10,
                        "preference": {
                            "matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]
                        },
                    }
                ]
            }
        },
    },
}


def apply(kubectl: Kubectl, objects: list[dict[str, Any]]) -> None:
    manifest = json.dumps({"apiVersion": "v1", "kind": "List", "items": objects})
    kubectl(
        "apply", "--server-side", "--field-manager=trussium-operator", "-f", "-", input=manifest
    )


def versions(kubectl: Kubectl, namespace: str, objects: list[dict[str, Any]]) -> dict[str, str]:
    found = {}
    for obj in objects:
        group = obj["apiVersion"].rpartition("/")[0]
        resource = f"{obj['kind'].lower()}.{group}".rstrip(".")
        live = json.loads(kubectl("get", "-n", namespace, resource, "demo", "-o", "json").stdout)
        found[obj["kind"]] = live["metadata"]["resourceVersion"]
    return found


@pytest.mark.api
@pytest.mark.parametrize(
    "spec", [SPEC, SPEC | EVERY_SETTING], ids=["production", "with-the-runtimes-settings"]
)
def test_rendered_objects_apply_and_reapplying_changes_nothing(
    spec: dict[str, Any], kubectl: Kubectl, namespace: str
) -> None:
    runtime = TrussiumRuntime.model_validate(
        {
            "metadata": {
                "name": "demo",
                "namespace": namespace,
                "uid": "0d6c6b2e-1",
                "generation": 1,
            },
            "spec": spec,
        }
    )
    objects = render_managed_objects(runtime)
    apply(kubectl, objects)
    first = versions(kubectl, namespace, objects)
    assert len(first) == 7

    live = json.loads(kubectl("get", "-n", namespace, "deployment", "demo", "-o", "json").stdout)
    apply(kubectl, render_managed_objects(runtime, live))
    assert versions(kubectl, namespace, objects) == first

    service = json.loads(kubectl("get", "-n", namespace, "service", "demo", "-o", "json").stdout)
    assert service["spec"]["clusterIP"]
    assert service["spec"]["ports"][0]["nodePort"] > 0
