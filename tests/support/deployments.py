"""Managed Deployments for the tests: as the API server reports them (status, lifecycle)
and as an admission review carries them (the managed-Deployment guard)."""

from typing import Any

IMAGE = "ghcr.io/trussium/runtime:1.4.0"
DEADLINE = {
    "type": "Progressing",
    "status": "False",
    "reason": "ProgressDeadlineExceeded",
    "message": 'ReplicaSet "demo-7d9" has timed out progressing.',
}
QUOTA = {
    "type": "ReplicaFailure",
    "status": "True",
    "reason": "FailedCreate",
    "message": "pods are forbidden: exceeded quota",
}


def deployment(
    count: int = 1,
    *,
    image: str = IMAGE,
    generation: int = 5,
    observed: int = 5,
    conditions: tuple[dict[str, str], ...] = (),
    containers: list[dict[str, str]] | None = None,
    **counts: int,
) -> dict[str, Any]:
    """`count` replicas, all updated, ready and available unless `counts` says otherwise."""
    return {
        "metadata": {"name": "demo", "generation": generation},
        "spec": {
            "replicas": count,
            "template": {
                "spec": {"containers": containers or [{"name": "trussium", "image": image}]}
            },
        },
        "status": {
            "observedGeneration": observed,
            "replicas": count,
            "updatedReplicas": count,
            "readyReplicas": count,
            "availableReplicas": count,
            **counts,
            "conditions": list(conditions),
        },
    }


def managed_deployment() -> dict[str, Any]:
    """A Deployment the operator manages for TrussiumRuntime team-a/chat-owner."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "chat",
            "namespace": "team-a",
            "labels": {
                "app.kubernetes.io/name": "trussium",
                "app.kubernetes.io/instance": "chat",
                "app.kubernetes.io/component": "runtime",
                "app.kubernetes.io/managed-by": "trussium-operator",
            },
            "ownerReferences": [
                {
                    "apiVersion": "runtime.trussium.io/v1alpha1",
                    "kind": "TrussiumRuntime",
                    "name": "chat-owner",
                    "uid": "1",
                    "controller": True,
                }
            ],
        },
        "spec": {
            "replicas": 1,
            "template": {
                "metadata": {"annotations": {"runtime.trussium.io/config-checksum": "ab"}},
                "spec": {
                    "containers": [
                        {"name": "trussium", "image": "ghcr.io/t/runtime:1.0", "resources": {}}
                    ],
                    "nodeSelector": {"disk": "ssd"},
                },
            },
        },
    }
