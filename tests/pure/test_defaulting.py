"""Defaulting: the contract's defaults, as the API server applies them, with a minimal patch."""

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.json_patch import apply_json_patch
from tests.support.strategies import json_values, runtimes
from trussium_operator.common.defaulting import apply_defaults, json_pointer, spec_patch

MINIMAL: dict[str, Any] = {
    "apiVersion": "runtime.trussium.io/v1alpha1",
    "kind": "TrussiumRuntime",
    "metadata": {"name": "rt"},
    "spec": {
        "image": {"repository": "ghcr.io/trussium/runtime", "tag": "1.0.0"},
        "provider": {"type": "ollama", "model": "llama3"},
    },
}


def test_minimal_runtime_gets_the_contract_defaults() -> None:
    result = apply_defaults(MINIMAL)
    spec = result.object["spec"]
    assert spec["replicas"] == 1
    assert spec["image"]["pullPolicy"] == "IfNotPresent"
    assert spec["service"] == {"type": "ClusterIP", "port": 9000}
    assert "networkPolicy" not in spec
    assert "autoscaling" not in spec
    assert result.patch == [
        {"op": "add", "path": "/spec/image/pullPolicy", "value": "IfNotPresent"},
        {"op": "add", "path": "/spec/replicas", "value": 1},
        {"op": "add", "path": "/spec/service", "value": {"type": "ClusterIP", "port": 9000}},
    ]
    assert apply_json_patch(MINIMAL, result.patch) == result.object


def test_input_is_not_mutated() -> None:
    before = copy.deepcopy(MINIMAL)
    apply_defaults(MINIMAL)
    assert before == MINIMAL


def test_nested_defaults_apply_only_when_the_parent_is_present() -> None:
    obj = copy.deepcopy(MINIMAL)
    obj["spec"]["autoscaling"] = {"maxReplicas": 3}
    obj["spec"]["networkPolicy"] = {}
    obj["spec"]["service"] = {"port": 8080}
    spec = apply_defaults(obj).object["spec"]
    assert spec["autoscaling"] == {
        "enabled": False,
        "minReplicas": 1,
        "maxReplicas": 3,
        "targetCPUUtilizationPercentage": 80,
    }
    assert spec["networkPolicy"] == {"enabled": False}
    assert spec["service"] == {"type": "ClusterIP", "port": 8080}


def test_already_defaulted_object_yields_no_patch() -> None:
    defaulted = apply_defaults(MINIMAL).object
    assert apply_defaults(defaulted).patch == []


def test_null_is_replaced_like_the_api_server_does() -> None:
    obj = copy.deepcopy(MINIMAL)
    obj["spec"]["replicas"] = None
    result = apply_defaults(obj)
    assert {"op": "replace", "path": "/spec/replicas", "value": 1} in result.patch
    assert apply_json_patch(obj, result.patch) == result.object


def test_null_without_a_default_is_pruned_like_the_api_server_does() -> None:
    obj = copy.deepcopy(MINIMAL)
    obj["spec"]["image"]["digest"] = None
    obj["spec"]["podMetadata"] = {"labels": {"a": None, "b": "x"}}
    result = apply_defaults(obj)
    assert {"op": "remove", "path": "/spec/image/digest"} in result.patch
    assert {"op": "remove", "path": "/spec/podMetadata/labels/a"} in result.patch
    assert result.object["spec"]["podMetadata"] == {"labels": {"b": "x"}}
    assert "digest" not in result.object["spec"]["image"]
    assert apply_json_patch(obj, result.patch) == result.object


def test_explicit_values_are_kept() -> None:
    obj = copy.deepcopy(MINIMAL)
    obj["spec"]["replicas"] = 0
    obj["spec"]["image"]["pullPolicy"] = "Always"
    spec = apply_defaults(obj).object["spec"]
    assert (spec["replicas"], spec["image"]["pullPolicy"]) == (0, "Always")


@pytest.mark.parametrize(
    "spec", ["not an object", 7, [], {"image": "x", "service": 5, "autoscaling": []}]
)
def test_malformed_input_is_left_for_validation(spec: object) -> None:
    obj = {"metadata": {"name": "x"}, "spec": spec}
    result = apply_defaults(obj)
    assert apply_json_patch(obj, result.patch) == result.object
    if not isinstance(spec, dict):
        assert result.object == obj


def test_json_pointer_escapes_per_rfc_6901() -> None:
    assert json_pointer(["spec", "a/b", "c~d", 0]) == "/spec/a~1b/c~0d/0"


@settings(max_examples=200, deadline=None)
@given(runtimes())
def test_defaulting_is_idempotent_and_the_patch_reproduces_it(obj: dict[str, Any]) -> None:
    first = apply_defaults(obj)
    assert apply_json_patch(obj, first.patch) == first.object
    again = apply_defaults(first.object)
    assert again.patch == []
    assert again.object == first.object


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(["spec", "metadata", "status"]), json_values()))
def test_defaulting_never_raises_on_json(obj: dict[str, Any]) -> None:
    result = apply_defaults(obj)
    assert apply_json_patch(obj, result.patch) == result.object


def _null_free(value: Any) -> Any:
    """`value` without nulls, as the API server sends a runtime (it prunes them first)."""
    if isinstance(value, dict):
        return {k: _null_free(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_null_free(v) for v in value if v is not None]
    return value


@settings(max_examples=200, deadline=None)
@given(runtimes(), json_values(), json_values())
def test_the_admission_patch_is_the_whole_objects_for_what_the_api_server_sends(
    obj: dict[str, Any], metadata: Any, status: Any
) -> None:
    parts = {"metadata": _null_free(metadata), "status": _null_free(status)}
    sent = obj | {key: value for key, value in parts.items() if value is not None}
    assert spec_patch(sent) == apply_defaults(sent).patch


def test_the_admission_patch_reads_nothing_but_the_spec() -> None:
    # A status a review may fill: left as it is, not even walked.
    class Unreadable(dict[str, Any]):
        def items(self) -> Any:
            raise AssertionError("status walked")

    obj = copy.deepcopy(MINIMAL) | {"status": Unreadable(conditions=[{}] * 3)}
    assert spec_patch(obj) == apply_defaults(MINIMAL).patch
