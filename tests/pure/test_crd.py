"""The committed CRD and API reference are the generator's output, and agree with the models."""

import json
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal, Union

import annotated_types
import pytest
import yaml
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from hack import crd
from trussium_operator.common import constants, defaulting_schema
from trussium_operator.common.api import (
    AUTOSCALING_BOUNDS_ORDERED,
    IMAGE_TAG_XOR_DIGEST,
    NETWORK_POLICY_NEEDS_INGRESS,
    TrussiumRuntimeSpec,
    TrussiumRuntimeStatus,
)
from trussium_operator.common.schema import openapi_schema
from trussium_operator.controller.machinery.kube import Resource
from trussium_operator.controller.runtime.kinds import MANAGED_KINDS, ManagedKind


def test_committed_crd_is_the_generator_output() -> None:
    assert crd.CRD_PATH.read_text() == crd.crd_yaml(), "run `make crd`"


def test_committed_api_reference_is_the_generator_output() -> None:
    assert crd.DOCS_PATH.read_text() == crd.reference_markdown(), "run `make crd`"


def test_committed_defaulting_schema_is_the_generator_output() -> None:
    """Defaulting reads the schema from this module, not from the models at start-up."""
    assert crd.DEFAULTING_SCHEMA_PATH.read_text() == crd.defaulting_schema_module(), (
        "run `make crd`"
    )


def test_defaulting_schema_keeps_every_default_and_field_of_the_crd() -> None:
    def shape(node: dict[str, Any]) -> Any:
        return {
            "default": node.get("default", "<none>"),
            "properties": {k: shape(v) for k, v in node.get("properties", {}).items()},
            "more": [shape(node[k]) for k in ("additionalProperties", "items") if k in node],
        }

    assert shape(defaulting_schema.SCHEMA) == shape(openapi_schema())


def test_committed_controller_rbac_on_managed_kinds_is_the_generator_output() -> None:
    assert crd.RBAC_PATH.read_text() == crd.rbac_template(), "run `make crd`"


def test_rbac_on_managed_kinds_follows_each_registry_entry() -> None:
    """A kind added to the registry is granted its verbs, grouped by API group."""
    extra = ManagedKind(
        Resource("monitoring.coreos.com/v1", "PodMonitor", "podmonitors"),
        lambda context: {},
        verbs=("get", "list", "watch"),
    )
    rules = crd.managed_kind_rules((*MANAGED_KINDS, extra))
    assert rules[0] == {
        "apiGroups": [""],
        "resources": ["configmaps", "serviceaccounts", "services"],
        "verbs": ["get", "list", "watch", "create", "patch", "delete"],
    }
    assert rules[-1] == {
        "apiGroups": ["monitoring.coreos.com"],
        "resources": ["podmonitors"],
        "verbs": ["get", "list", "watch"],
    }


def test_check_mode_reports_staleness_and_writing_fixes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(crd, "CRD_PATH", tmp_path / "crd.yaml")
    monkeypatch.setattr(crd, "DOCS_PATH", tmp_path / "api-reference.md")
    monkeypatch.setattr(crd, "RBAC_PATH", tmp_path / "rbac.tpl")
    monkeypatch.setattr(crd, "DEFAULTING_SCHEMA_PATH", tmp_path / "defaulting_schema.py")
    crd.DOCS_PATH.write_text(crd.reference_markdown())
    crd.RBAC_PATH.write_text(crd.rbac_template())
    crd.DEFAULTING_SCHEMA_PATH.write_text(crd.defaulting_schema_module())
    crd.CRD_PATH.write_text(crd.crd_yaml() + "# edited\n")
    assert crd.main(["--check"]) == 1
    assert "crd.yaml is stale" in capsys.readouterr().err
    assert crd.main([]) == 0
    assert crd.main(["--check"]) == 0


def _version() -> dict[str, Any]:
    document = yaml.safe_load(crd.CRD_PATH.read_text())
    (version,) = document["spec"]["versions"]
    assert isinstance(version, dict)
    return version


def test_api_identity() -> None:
    document = yaml.safe_load(crd.CRD_PATH.read_text())
    assert document["metadata"]["name"] == "trussiumruntimes.runtime.trussium.io"
    names = document["spec"]["names"]
    assert (names["kind"], names["plural"], names["singular"], names["shortNames"]) == (
        "TrussiumRuntime",
        "trussiumruntimes",
        "trussiumruntime",
        ["truntime"],
    )
    assert "all" not in names["categories"]
    assert document["spec"]["scope"] == "Namespaced"
    version = _version()
    assert version["name"] == "v1alpha1"
    assert version["subresources"] == {"status": {}}
    assert version["schema"]["openAPIV3Schema"]["required"] == ["spec"]


def test_printer_columns_of_the_contract() -> None:
    columns = {c["name"]: c["jsonPath"] for c in _version()["additionalPrinterColumns"]}
    assert columns == {
        "Ready": ".status.readyReplicas",
        "Desired": ".spec.replicas",
        "Status": '.status.conditions[?(@.type=="Ready")].status',
        "Reason": '.status.conditions[?(@.type=="Ready")].reason',
        "Message": '.status.conditions[?(@.type=="Ready")].message',
        "Provider": ".spec.provider.type",
        "Model": ".spec.provider.model",
        "Version": ".spec.image.tag",
        "Target": ".status.desiredReplicas",
        "Image": ".status.currentImage",
        "Desired Image": ".status.desiredImage",
        "Age": ".metadata.creationTimestamp",
    }
    # The Go operator's columns keep their places (its users' scripts read them by position).
    shown = [c["name"] for c in _version()["additionalPrinterColumns"] if not c.get("priority")]
    assert shown == [
        "Ready",
        "Desired",
        "Provider",
        "Model",
        "Version",
        "Target",
        "Status",
        "Reason",
        "Image",
        "Age",
    ]


def _spec() -> dict[str, Any]:
    spec = _version()["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert isinstance(spec, dict)
    return spec


def test_cel_rules_carry_the_contract_messages_and_ratchet() -> None:
    """Each rule passes a value unchanged since the old object (optionalOldSelf), as
    the API server's own ratcheting does from 1.33 on status writes too."""
    spec = _spec()["properties"]
    rules = {
        name: spec[name]["x-kubernetes-validations"]
        for name in ("image", "networkPolicy", "autoscaling")
    }
    ratcheted = "(oldSelf.hasValue() && oldSelf.value() == self) || "
    assert rules == {
        "image": [
            {
                "rule": ratcheted + "(has(self.tag) != has(self.digest))",
                "optionalOldSelf": True,
                "message": "exactly one of tag or digest must be specified",
            }
        ],
        "networkPolicy": [
            {
                "rule": ratcheted
                + "(!self.enabled || (has(self.ingress) && size(self.ingress) > 0))",
                "optionalOldSelf": True,
                "message": "at least one ingress rule is required when networkPolicy.enabled "
                "is true",
            }
        ],
        "autoscaling": [
            {
                "rule": ratcheted + "(self.maxReplicas >= self.minReplicas)",
                "optionalOldSelf": True,
                "message": "maxReplicas must be greater than or equal to minReplicas",
            }
        ],
    }
    assert {IMAGE_TAG_XOR_DIGEST.message, NETWORK_POLICY_NEEDS_INGRESS.message} <= {
        r[0]["message"] for r in rules.values()
    }
    assert AUTOSCALING_BOUNDS_ORDERED.message == rules["autoscaling"][0]["message"]


def test_list_types_and_quantities() -> None:
    spec = _spec()["properties"]
    pull_secrets = spec["imagePullSecrets"]
    assert pull_secrets["x-kubernetes-list-type"] == "map"
    assert pull_secrets["x-kubernetes-list-map-keys"] == ["name"]
    assert pull_secrets["maxItems"] == 20
    assert spec["networkPolicy"]["properties"]["ingress"]["x-kubernetes-list-type"] == "atomic"
    quantity = spec["resources"]["properties"]["limits"]["additionalProperties"]
    assert quantity["x-kubernetes-int-or-string"] is True
    assert quantity["pattern"].startswith("^(\\+|-)?")
    conditions = _version()["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"][
        "conditions"
    ]
    assert conditions["x-kubernetes-list-map-keys"] == ["type"]


def test_defaults_of_the_contract() -> None:
    spec = _spec()["properties"]
    assert spec["replicas"]["default"] == 1
    assert spec["image"]["properties"]["pullPolicy"]["default"] == "IfNotPresent"
    assert spec["service"]["default"] == {}
    assert spec["service"]["properties"]["type"]["default"] == "ClusterIP"
    assert spec["service"]["properties"]["port"]["default"] == 9000
    assert spec["networkPolicy"]["properties"]["enabled"]["default"] is False
    autoscaling = spec["autoscaling"]["properties"]
    assert [autoscaling[k].get("default") for k in autoscaling] == [False, 1, 10, 80, None, None]
    assert "default" not in json.dumps(
        _version()["schema"]["openAPIV3Schema"]["properties"]["status"]
    )


# --- cross-check: every model field against its CRD property, from pydantic's field metadata


def _unwrap(annotation: Any) -> Any:
    while True:
        if typing.get_origin(annotation) is typing.Annotated:
            annotation = typing.get_args(annotation)[0]
        elif typing.get_origin(annotation) in (Union, types.UnionType) and type(
            None
        ) in typing.get_args(annotation):
            (annotation,) = [a for a in typing.get_args(annotation) if a is not type(None)]
        else:
            return annotation


def _constraints(field: FieldInfo) -> dict[str, Any]:
    found: dict[str, Any] = {}
    metadata = list(field.metadata)
    if typing.get_origin(field.annotation) is typing.Annotated:
        for extra in typing.get_args(field.annotation)[1:]:
            metadata += getattr(extra, "metadata", [])
    for item in metadata:
        if isinstance(item, annotated_types.Ge):
            found["minimum"] = item.ge
        elif isinstance(item, annotated_types.Le):
            found["maximum"] = item.le
        elif isinstance(item, annotated_types.MinLen):
            found["minLength"] = item.min_length
        elif isinstance(item, annotated_types.MaxLen):
            found["maxLength"] = item.max_length
        elif getattr(item, "pattern", None):
            found["pattern"] = item.pattern
    return found


_SCALARS = {int: "integer", str: "string", bool: "boolean"}


def _check_model(model: type[BaseModel], schema: dict[str, Any], where: str) -> int:
    """Compare a model with its schema node; returns how many fields were compared."""
    properties = schema["properties"]
    assert set(properties) == {f.alias or n for n, f in model.model_fields.items()}, where
    required = {f.alias or n for n, f in model.model_fields.items() if f.is_required()}
    assert set(schema.get("required", ())) == required, where
    compared = 0
    for name, field in model.model_fields.items():
        wire = field.alias or name
        node, at = properties[wire], f"{where}.{wire}"
        tp = _unwrap(field.annotation)
        origin = typing.get_origin(tp)
        if origin is Literal:
            assert node["type"] == "string", at
            assert node["enum"] == list(typing.get_args(tp)), at
        elif origin is list:
            assert node["type"] == "array", at
            item = _unwrap(typing.get_args(tp)[0])
            if isinstance(item, type) and issubclass(item, BaseModel):
                compared += _check_model(item, node["items"], at + "[]")
        elif origin is dict:
            assert node["type"] == "object", at
            assert "additionalProperties" in node, at
        elif isinstance(tp, type) and issubclass(tp, BaseModel):
            compared += _check_model(tp, node, at)
        elif tp in _SCALARS:
            assert node["type"] == _SCALARS[tp], at
        for key, value in _constraints(field).items():
            limit = {"minLength": "minItems", "maxLength": "maxItems"}
            key = limit[key] if node["type"] == "array" and key in limit else key
            assert node[key] == value, (at, key)
        if where.startswith("status") or field.is_required() or field.default is None:
            assert "default" not in node, at
        elif field.default_factory is not None:  # an object defaulting to {}, then its own
            assert node["default"] == {}, at
            assert field.get_default(call_default_factory=True) == tp.model_validate({}), at
        else:
            assert node["default"] == field.default, at
        compared += 1
    return compared


def test_models_and_crd_agree_on_every_field() -> None:
    root = _version()["schema"]["openAPIV3Schema"]["properties"]
    compared = _check_model(TrussiumRuntimeSpec, root["spec"], "spec")
    compared += _check_model(TrussiumRuntimeStatus, root["status"], "status")
    assert compared > 60


def test_int32_fields_say_so() -> None:
    spec = _spec()["properties"]
    for node in (
        spec["replicas"],
        spec["service"]["properties"]["port"],
        spec["autoscaling"]["properties"]["maxReplicas"],
        spec["runtime"]["properties"]["streamIdleTimeoutSeconds"],
    ):
        assert node["format"] == "int32"
    # Bounded explicitly: older API servers (1.32 among them) ignore the range of the format.
    weight = spec["scheduling"]["properties"]["affinity"]["properties"]["nodeAffinity"]
    term = weight["properties"]["preferredDuringSchedulingIgnoredDuringExecution"]["items"]
    assert term["properties"]["weight"] | {"description": ""} == {
        "type": "integer",
        "format": "int32",
        "minimum": -(2**31),
        "maximum": 2**31 - 1,
        "description": "",
    }
    assert constants.CRD_NAME in crd.CRD_PATH.name


def _nodes(node: dict[str, Any], path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    yield path, node
    for name, child in node.get("properties", {}).items():
        yield from _nodes(child, f"{path}.{name}")
    if isinstance(node.get("additionalProperties"), dict):
        yield from _nodes(node["additionalProperties"], f"{path}[*]")
    if "items" in node:
        yield from _nodes(node["items"], f"{path}[]")


def test_schema_is_structural() -> None:
    """Every node has a type (the API server refuses a non-structural CRD)."""
    schema = _version()["schema"]["openAPIV3Schema"]
    for path, node in _nodes(schema, ""):
        if node.get("x-kubernetes-int-or-string"):
            assert node["anyOf"] == [{"type": "integer"}, {"type": "string"}], path
        else:
            assert node.get("type") in (
                "object",
                "array",
                "string",
                "integer",
                "number",
                "boolean",
            ), path
            assert "anyOf" not in node, path
            assert "$ref" not in node, path


def test_every_list_and_map_of_the_spec_is_bounded() -> None:
    """ADR 0027: the bounds keep a review's cost bounded; a new collection needs one."""
    unbounded = []

    def walk(node: dict[str, Any], path: str) -> None:
        if node.get("type") == "array":
            if "maxItems" not in node:
                unbounded.append(path)
            walk(node["items"], f"{path}[]")
        for key, sub in node.get("properties", {}).items():
            walk(sub, f"{path}.{key}")
        if isinstance(node.get("additionalProperties"), dict):
            if "maxProperties" not in node:
                unbounded.append(path)
            walk(node["additionalProperties"], f"{path}[*]")

    walk(openapi_schema()["properties"]["spec"], "spec")
    assert unbounded == []
