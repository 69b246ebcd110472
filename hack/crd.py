"""Build script: the files generated from the code, which CI holds current.

The TrussiumRuntime CRD and docs/api-reference.md from `common.api` (the schema
itself is computed in `common.schema`; this adds the CRD's names and printer
columns), the part of that schema defaulting reads as a Python module
(`common/defaulting_schema.py`: computing it from the models costs every
program's start-up), and the controller's RBAC on its managed kinds from their
registry (`controller.runtime.kinds`). `make crd`
(`python -m hack.crd`) writes them; `python -m hack.crd --check` exits 1 when
any is stale.
"""

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import yaml

from hack.api_reference import render_reference
from trussium_operator.common import constants
from trussium_operator.common.schema import openapi_schema
from trussium_operator.controller.runtime.kinds import MANAGED_KINDS, ManagedKind

REPO_ROOT = Path(__file__).resolve().parent.parent
CHART = REPO_ROOT / "charts" / "trussium-operator"
CRD_PATH = CHART / "files" / "crds" / f"{constants.CRD_NAME}.yaml"
DOCS_PATH = REPO_ROOT / "docs" / "api-reference.md"
RBAC_PATH = CHART / "templates" / "_controller-managed-kinds.tpl"
DEFAULTING_SCHEMA_PATH = REPO_ROOT / "common" / "defaulting_schema.py"
# What `common.defaulting` reads of a schema node.
DEFAULTING_KEYS = ("default", "properties", "additionalProperties", "items")

# Not `all`: `kubectl delete all --all` must not delete runtimes as a side effect,
# and `all` is by convention for built-in workload kinds.
CATEGORIES = ["trussium"]

# The contract's columns (Ready, Desired, Provider, Model, Version, Age) keep their
# paths and places (the Go operator's order); the others read the status, so they
# stay true for an autoscaled runtime (Target is the autoscaler's count where Desired
# shows spec.replicas) and a digest-pinned one (Version, spec.image.tag, is blank
# then). ADR 0022.
_READY = '.status.conditions[?(@.type=="Ready")]'
PRINTER_COLUMNS: list[dict[str, Any]] = [
    {"name": "Ready", "type": "integer", "jsonPath": ".status.readyReplicas"},
    {"name": "Desired", "type": "integer", "jsonPath": ".spec.replicas"},
    {"name": "Provider", "type": "string", "jsonPath": ".spec.provider.type"},
    {"name": "Model", "type": "string", "jsonPath": ".spec.provider.model"},
    {"name": "Version", "type": "string", "jsonPath": ".spec.image.tag"},
    {
        "name": "Target",
        "type": "integer",
        "jsonPath": ".status.desiredReplicas",
        "description": "The replica count the runtime is held to: the autoscaler's when "
        "autoscaling (Desired then shows spec.replicas), else spec.replicas.",
    },
    {
        "name": "Status",
        "type": "string",
        "jsonPath": f"{_READY}.status",
        "description": "Status of the Ready condition.",
    },
    {
        "name": "Reason",
        "type": "string",
        "jsonPath": f"{_READY}.reason",
        "description": "Reason of the Ready condition.",
    },
    {
        "name": "Message",
        "type": "string",
        "jsonPath": f"{_READY}.message",
        "description": "Message of the Ready condition: ready replicas of the desired count "
        "(the autoscaler's, when autoscaling), or what went wrong.",
        "priority": 1,
    },
    {
        "name": "Image",
        "type": "string",
        "jsonPath": ".status.currentImage",
        "description": "The image the managed Deployment runs.",
    },
    {
        "name": "Desired Image",
        "type": "string",
        "jsonPath": ".status.desiredImage",
        "description": "The image rendered from spec.image (differs from Image during an upgrade).",
        "priority": 1,
    },
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]


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
    header = "# Generated by `make crd` (hack/crd.py) from common/api.py. Do not edit.\n"
    return header + yaml.safe_dump(crd(), sort_keys=False, width=100)


def reference_markdown() -> str:
    return render_reference(openapi_schema())


def defaulting_schema(node: dict[str, Any]) -> dict[str, Any]:
    """`node` with only what defaulting reads, at every level, in the same order."""
    kept: dict[str, Any] = {}
    for key, value in node.items():
        if key == "default":
            kept[key] = value
        elif key == "properties":
            kept[key] = {name: defaulting_schema(child) for name, child in value.items()}
        elif key in ("additionalProperties", "items") and isinstance(value, dict):
            kept[key] = defaulting_schema(value)
    return kept


def _literal(value: Any, indent: str = "") -> str:
    """`value` (JSON data) as Python source, laid out as `ruff format` keeps it: one entry
    per line, each with a trailing comma; strings in JSON's spelling, which Python reads."""
    inner = indent + "    "
    if isinstance(value, dict) and value:
        entries = [f"{json.dumps(key)}: {_literal(item, inner)}" for key, item in value.items()]
        opening, closing = "{", "}"
    elif isinstance(value, list) and value:
        entries = [_literal(item, inner) for item in value]
        opening, closing = "[", "]"
    else:
        return json.dumps(value) if isinstance(value, str) else repr(value)
    lines = "".join(f"{inner}{entry},\n" for entry in entries)
    return f"{opening}\n{lines}{indent}{closing}"


def defaulting_schema_module() -> str:
    return (
        '"""The CRD\'s openAPIV3Schema reduced to what `common.defaulting` reads: defaults,\n'
        "properties, additionalProperties and items, in the schema's order.\n\n"
        "Generated by `make crd` (hack/crd.py) from `common.schema`. Do not edit: computed\n"
        'from the models at import, it would cost every program\'s start-up.\n"""\n\n'
        "from typing import Any\n\n"
        f"SCHEMA: dict[str, Any] = {_literal(defaulting_schema(openapi_schema()))}\n"
    )


def managed_kind_rules(kinds: tuple[ManagedKind, ...] = MANAGED_KINDS) -> list[dict[str, Any]]:
    """One rule per API group and set of verbs, in registry order."""
    rules: dict[tuple[str, tuple[str, ...]], list[str]] = {}
    for kind in kinds:
        group = kind.resource.api_version.rpartition("/")[0]
        rules.setdefault((group, kind.verbs), []).append(kind.resource.plural)
    return [
        {"apiGroups": [group], "resources": resources, "verbs": list(verbs)}
        for (group, verbs), resources in rules.items()
    ]


def rbac_template() -> str:
    """The chart's named template of the controller's rules on its managed kinds."""
    rules = "".join(
        f"- apiGroups: {json.dumps(rule['apiGroups'])}\n"
        f"  resources: {json.dumps(rule['resources'])}\n"
        f"  verbs: {json.dumps(rule['verbs'])}\n"
        for rule in managed_kind_rules()
    )
    return (
        "{{- /*\n"
        "Generated by `make crd` (hack/crd.py) from the managed kinds' registry,\n"
        "controller/runtime/kinds.py (each entry's verbs and why). Do not edit.\n"
        "*/}}\n"
        '{{- define "trussium-operator.managedKindRules" -}}\n'
        f"{rules}"
        "{{- end }}\n"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hack.crd", description=__doc__)
    parser.add_argument(
        "--check", action="store_true", help="exit 1 if the generated files are stale"
    )
    args = parser.parse_args(argv)
    outputs = {
        CRD_PATH: crd_yaml(),
        DOCS_PATH: reference_markdown(),
        RBAC_PATH: rbac_template(),
        DEFAULTING_SCHEMA_PATH: defaulting_schema_module(),
    }
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
