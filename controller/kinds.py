"""The API resources of the Trussium layer: TrussiumRuntimes and the kinds it manages."""

from common import constants as c
from controller.machinery.kube import Resource

RUNTIMES = Resource(c.API_VERSION, c.KIND, c.PLURAL)
_PLURALS = {
    "ConfigMap": "configmaps",
    "ServiceAccount": "serviceaccounts",
    "Service": "services",
    "Deployment": "deployments",
    "PodDisruptionBudget": "poddisruptionbudgets",
    "NetworkPolicy": "networkpolicies",
    "HorizontalPodAutoscaler": "horizontalpodautoscalers",
}
OWNED = {
    kind: Resource(c.MANAGED_API_VERSIONS[kind], kind, plural) for kind, plural in _PLURALS.items()
}
