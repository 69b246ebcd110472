"""The TrussiumRuntime CustomResourceDefinition, generated from `common.api`.

The models are the source of truth; this module turns their JSON schema
into a structural OpenAPI v3 schema (inlined, no nulls, int-or-string for
quantities), which the API server enforces even without the webhook and
which `common.defaulting` walks exactly as the API server does.

`python -m common.crd` writes the CRD and docs/api-reference.md;
`python -m common.crd --check` exits 1 when either is stale.
"""

import argparse
import copy
import sys
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from common import constants
from common.api import TrussiumRuntimeSpec, TrussiumRuntimeStatus
from common.api_reference import render_reference

REPO_ROOT = Path(__file__).resolve().parent.parent
CRD_PATH = REPO_ROOT / "charts" / "trussium-operator" / "crds" / f"{constants.CRD_NAME}.yaml"
DOCS_PATH = REPO_ROOT / "docs" / "api-reference.md"

# Not `all`: `kubectl delete all --all` must not delete runtimes as a side effect,
# and `all` is by convention for built-in workload kinds.
CATEGORIES = ["trussium"]

PRINTER_COLUMNS: list[dict[str, Any]] = [
    {"name": "Ready", "type": "integer", "jsonPath": ".status.readyReplicas"},
    {"name": "Desired", "type": "integer", "jsonPath": ".spec.replicas"},
    {"name": "Provider", "type": "string", "jsonPath": ".spec.provider.type"},
    {"name": "Model", "type": "string", "jsonPath": ".spec.provider.model"},
    {"name": "Version", "type": "string", "jsonPath": ".spec.image.tag"},
    {
        "name": "Reason",
        "type": "string",
        "jsonPath": '.status.conditions[?(@.type=="Ready")].reason',
        "description": "Reason of the Ready condition.",
    },
    {
        "name": "Image",
        "type": "string",
        "jsonPath": ".status.currentImage",
        "description": "The image the managed Deployment runs.",
        "priority": 1,
    },
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]

# Pydantic's JSON-schema keys that have no place in a structural schema.
_DROPPED = {"title", "additionalProperties", "$defs"}


def _structural(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """One pydantic JSON-schema node as a structural OpenAPI v3 node."""
    siblings = {k: v for k, v in node.items() if k not in ("$ref", "anyOf")}
    if "$ref" in node:
        base = _structural(defs[node["$ref"].rsplit("/", 1)[1]], defs)
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


def crd() -> dict[str, Any]:
    """The CustomResourceDefinition manifest."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": constants.CRD_NAME,
            "labels": {constants.LABEL_NAME: "trussium-operator"},
        },
        "spec": {
            "group": constants.GROUP,
            "names": {
                "kind": constants.KIND,
                "listKind": f"{constants.KIND}List",
                "plural": constants.PLURAL,
                "singular": constants.SINGULAR,
                "shortNames": [constants.SHORT_NAME],
                "categories": CATEGORIES,
            },
            "scope": "Namespaced",
            "versions": [
                {
                    "name": constants.VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": PRINTER_COLUMNS,
                    "schema": {"openAPIV3Schema": openapi_schema()},
                }
            ],
        },
    }


def crd_yaml() -> str:
    header = "# Generated by `python -m common.crd` from common/api.py. Do not edit.\n"
    return header + yaml.safe_dump(crd(), sort_keys=False, width=100)


def reference_markdown() -> str:
    return render_reference(openapi_schema())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m common.crd", description=__doc__)
    parser.add_argument(
        "--check", action="store_true", help="exit 1 if the generated files are stale"
    )
    args = parser.parse_args(argv)
    outputs = {CRD_PATH: crd_yaml(), DOCS_PATH: reference_markdown()}
    stale = [p for p, text in outputs.items() if not p.exists() or p.read_text() != text]
    if args.check:
        for path in stale:
            print(f"{path} is stale: run `make crd`", file=sys.stderr)
        return 1 if stale else 0
    for path in stale:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(outputs[path])
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
