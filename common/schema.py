"""The TrussiumRuntime CRD's structural OpenAPI v3 schema, computed from `common.api`.

The models are the source of truth; this turns their JSON schema into a
structural schema (inlined, no nulls, int-or-string for quantities). The API
server enforces it even without the webhook, and `common.defaulting` walks it
exactly as the API server does. Writing it into the chart and the docs is the
build script's job (`make crd`, hack/crd.py), not the core's.
"""

import copy
from functools import cache
from typing import Any

from trussium_operator.common.api import TrussiumRuntimeSpec, TrussiumRuntimeStatus

# Pydantic's JSON-schema keys that have no place in a structural schema.
_DROPPED = {"title", "additionalProperties", "$defs"}


def _structural(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """One pydantic JSON-schema node as a structural OpenAPI v3 node."""
    siblings = {k: v for k, v in node.items() if k not in ("$ref", "anyOf")}
    if "$ref" in node:
        # A copy: a type used in two places must not share lists (YAML would alias them).
        base = _structural(copy.deepcopy(defs[node["$ref"].rsplit("/", 1)[1]]), defs)
    elif "anyOf" in node:
        variants = [v for v in node["anyOf"] if v != {"type": "null"}]
        types = sorted(v.get("type", "") for v in variants)
        if types == ["integer", "string"]:
            base = {
                "anyOf": [{"type": "integer"}, {"type": "string"}],
                "x-kubernetes-int-or-string": True,
            }
            base.update({k: v for var in variants for k, v in var.items() if k != "type"})
        else:
            (only,) = variants
            base = _structural(only, defs)
    else:
        base = {}
    out = base | {k: v for k, v in siblings.items() if k not in _DROPPED}
    if out.get("default", 0) is None:
        del out["default"]
    for exclusive, bound in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        # JSON Schema's exclusive bound is a number; OpenAPI v3.0's, which CRDs speak,
        # is a flag on the plain bound.
        if not isinstance(out.get(exclusive, True), bool):
            out[bound], out[exclusive] = out[exclusive], True
    if "properties" in out:
        out["properties"] = {k: _structural(v, defs) for k, v in out["properties"].items()}
    if isinstance(node.get("additionalProperties"), dict):
        out["additionalProperties"] = _structural(node["additionalProperties"], defs)
    if "items" in out:
        out["items"] = _structural(out["items"], defs)
    return out


def _model_schema(model: type[TrussiumRuntimeSpec] | type[TrussiumRuntimeStatus]) -> Any:
    raw = model.model_json_schema(by_alias=True, mode="validation")
    return _structural(raw, raw.get("$defs", {}))


def _without_defaults(node: Any) -> Any:
    """Status defaults are for the models in memory; the API server must not invent status."""
    if isinstance(node, dict):
        return {k: _without_defaults(v) for k, v in node.items() if k != "default"}
    if isinstance(node, list):
        return [_without_defaults(v) for v in node]
    return node


@cache
def _openapi_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "description": "A Trussium model-serving runtime managed by the trussium-operator.",
        "properties": {
            "apiVersion": {
                "type": "string",
                "description": "The versioned schema of this object: runtime.trussium.io/v1alpha1.",
            },
            "kind": {"type": "string", "description": "TrussiumRuntime."},
            "metadata": {"type": "object"},
            "spec": _model_schema(TrussiumRuntimeSpec),
            "status": _without_defaults(_model_schema(TrussiumRuntimeStatus)),
        },
        "required": ["spec"],
    }


def openapi_schema() -> dict[str, Any]:
    """The CRD's openAPIV3Schema (a fresh copy: callers may mutate it)."""
    return copy.deepcopy(_openapi_schema())
