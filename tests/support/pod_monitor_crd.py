"""A PodMonitor CRD (monitoring.coreos.com/v1) for the control plane, written here:
the fields the operator renders, typed and bounded as prometheus-operator's CRD
types them (required selector and endpoints, the duration pattern of `interval`),
and nothing else kept, so a field the operator misspells is pruned and shows."""

from typing import Any

# prometheus-operator's duration pattern, units largest first.
DURATION = (
    "^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$"
)
NAME = "podmonitors.monitoring.coreos.com"

_STRINGS = {"type": "array", "items": {"type": "string"}}
_SELECTOR = {
    "type": "object",
    "properties": {
        "matchLabels": {"type": "object", "additionalProperties": {"type": "string"}},
        "matchExpressions": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["key", "operator"],
                "properties": {
                    "key": {"type": "string"},
                    "operator": {"type": "string"},
                    "values": _STRINGS,
                },
            },
        },
    },
}
_RELABELING = {
    "type": "object",
    "properties": {
        "sourceLabels": {
            "type": "array",
            "items": {"type": "string", "pattern": "^[a-zA-Z_][a-zA-Z0-9_]*$"},
        },
        "targetLabel": {"type": "string"},
        "action": {"type": "string"},
        "regex": {"type": "string"},
        "replacement": {"type": "string"},
    },
}
_ENDPOINT = {
    "type": "object",
    "properties": {
        "port": {"type": "string"},
        "path": {"type": "string"},
        "interval": {"type": "string", "pattern": DURATION},
        "relabelings": {"type": "array", "items": _RELABELING},
    },
}


def pod_monitor_crd() -> dict[str, Any]:
    spec = {
        "type": "object",
        "required": ["selector"],
        "properties": {
            "selector": _SELECTOR,
            "namespaceSelector": {
                "type": "object",
                "properties": {"any": {"type": "boolean"}, "matchNames": _STRINGS},
            },
            "podMetricsEndpoints": {"type": "array", "items": _ENDPOINT},
        },
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": NAME},
        "spec": {
            "group": "monitoring.coreos.com",
            "scope": "Namespaced",
            "names": {
                "kind": "PodMonitor",
                "listKind": "PodMonitorList",
                "plural": "podmonitors",
                "singular": "podmonitor",
            },
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "required": ["spec"],
                            "properties": {"spec": spec},
                        }
                    },
                }
            ],
        },
    }
