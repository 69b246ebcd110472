"""The Service's annotations, load balancer source ranges and traffic policy:
what is refused and where, and what reaches the rendered Service."""

import copy
from typing import Any

import pytest

from trussium_operator.common.api import TrussiumRuntime
from trussium_operator.common.validation import validate_runtime
from trussium_operator.controller.runtime.kinds import render_managed_objects

SPEC: dict[str, Any] = {
    "image": {"repository": "ghcr.io/trussium/runtime", "tag": "1.4.2"},
    "provider": {"type": "openai", "model": "gpt-4o-mini"},
}
LOAD_BALANCER = {"type": "LoadBalancer"}


def manifest(service: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "runtime.trussium.io/v1alpha1",
        "kind": "TrussiumRuntime",
        "metadata": {"name": "rt", "namespace": "team"},
        "spec": {**copy.deepcopy(SPEC), "service": service},
    }


def errors_of(service: dict[str, Any]) -> dict[str, str]:
    return {e.path: e.message for e in validate_runtime(manifest(service)).errors}


def rendered_service(service: dict[str, Any]) -> dict[str, Any]:
    runtime = TrussiumRuntime.model_validate(manifest(service))
    (found,) = (o for o in render_managed_objects(runtime) if o["kind"] == "Service")
    return found


def test_annotations_and_load_balancer_settings_reach_the_service() -> None:
    service = rendered_service(
        {
            **LOAD_BALANCER,
            "annotations": {"service.beta.kubernetes.io/aws-load-balancer-internal": "true"},
            "loadBalancerSourceRanges": ["10.0.0.0/8", "2001:db8::/32"],
            "externalTrafficPolicy": "Local",
        }
    )
    assert service["metadata"]["annotations"] == {
        "service.beta.kubernetes.io/aws-load-balancer-internal": "true"
    }
    assert service["spec"]["loadBalancerSourceRanges"] == ["10.0.0.0/8", "2001:db8::/32"]
    assert service["spec"]["externalTrafficPolicy"] == "Local"


def test_a_service_without_the_new_fields_renders_as_before() -> None:
    service = rendered_service({"type": "LoadBalancer"})
    assert "annotations" not in service["metadata"]
    assert set(service["spec"]) == {"type", "selector", "ports"}
    assert errors_of({}) == {}


@pytest.mark.parametrize("key", ["runtime.trussium.io/config-checksum", "runtime.trussium.io/x"])
def test_the_operators_prefix_is_refused_at_its_key(key: str) -> None:
    errors = errors_of({"annotations": {key: "v"}})
    assert "reserved for the operator" in errors[f"spec.service.annotations[{key}]"]


def test_annotations_follow_the_api_servers_rules() -> None:
    errors = errors_of({"annotations": {"bad key": "v"}})
    assert "annotation key" in errors["spec.service.annotations[bad key]"]
    big = {"a": "x" * (128 * 1024), "b": "y" * (128 * 1024)}
    assert "at most 262144 bytes" in errors_of({"annotations": big})["spec.service.annotations"]
    too_many = {f"example.com/k{i}": "v" for i in range(65)}
    assert "spec.service.annotations" in errors_of({"annotations": too_many})


@pytest.mark.parametrize(
    ("cidr", "fragment"),
    [
        ("10.0.0.1/8", "canonical form, without host bits: 10.0.0.0/8"),
        ("2001:DB8::/32", "canonical form, without host bits: 2001:db8::/32"),
        ("10.0.0.0", "must be a CIDR"),
        (" 10.0.0.0/8", "must be a CIDR"),
        ("10.0.0.0/33", "must be a CIDR"),
        ("fe80::%eth0/64", "must be a CIDR"),
    ],
)
def test_source_ranges_are_canonical_cidrs(cidr: str, fragment: str) -> None:
    errors = errors_of({**LOAD_BALANCER, "loadBalancerSourceRanges": ["10.0.0.0/8", cidr]})
    assert fragment in errors["spec.service.loadBalancerSourceRanges[1]"]


@pytest.mark.parametrize("service_type", ["ClusterIP", "NodePort"])
@pytest.mark.parametrize(
    "field", [{"loadBalancerSourceRanges": ["10.0.0.0/8"]}, {"externalTrafficPolicy": "Local"}]
)
def test_load_balancer_settings_need_a_load_balancer(
    service_type: str, field: dict[str, Any]
) -> None:
    errors = errors_of({"type": service_type, **field})
    assert errors == {
        "spec.service": "loadBalancerSourceRanges and externalTrafficPolicy apply only to "
        "type LoadBalancer"
    }


def test_traffic_policy_is_cluster_or_local() -> None:
    errors = errors_of({**LOAD_BALANCER, "externalTrafficPolicy": "Anywhere"})
    assert "spec.service.externalTrafficPolicy" in errors
