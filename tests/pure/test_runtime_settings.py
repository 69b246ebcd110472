"""The runtime's own settings (ADR 0035): each typed field reaches the runtime under the
environment name it reads, credentials only from their Secret, and a runtime that sets
none of them renders what it rendered before."""

import copy
from typing import Any

import pytest

from trussium_operator.common import constants
from trussium_operator.common.api import TrussiumRuntime
from trussium_operator.common.references import referenced_secret_names
from trussium_operator.common.render import config_checksum
from trussium_operator.common.schema import openapi_schema
from trussium_operator.common.validation import validate_runtime
from trussium_operator.controller.runtime.kinds import render_managed_objects

BASE_SPEC: dict[str, Any] = {
    "image": {"repository": "ghcr.io/trussium/runtime", "tag": "1.4.0"},
    "provider": {"type": "openai", "model": "gpt-4o-mini"},
}
BASE_DATA = {
    "TRUSSIUM_ENVIRONMENT": "production",
    "TRUSSIUM_RUNTIME__HOST": "0.0.0.0",
    "TRUSSIUM_RUNTIME__PORT": "9000",
    "TRUSSIUM_PROVIDER__NAME": "openai",
}


def manifest(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "runtime.trussium.io/v1alpha1",
        "kind": "TrussiumRuntime",
        "metadata": {"name": "demo", "namespace": "prod", "uid": "u", "generation": 1},
        "spec": {**copy.deepcopy(BASE_SPEC), **spec},
    }


def objects(**spec: Any) -> dict[str, dict[str, Any]]:
    runtime = TrussiumRuntime.model_validate(manifest(**spec))
    return {obj["kind"]: obj for obj in render_managed_objects(runtime, None)}


def data(**spec: Any) -> dict[str, str]:
    config: dict[str, str] = objects(**spec)["ConfigMap"]["data"]
    return config


def env(**spec: Any) -> list[dict[str, Any]]:
    pod = objects(**spec)["Deployment"]["spec"]["template"]["spec"]
    container_env: list[dict[str, Any]] = pod["containers"][0]["env"]
    return container_env


EVERY_SETTING: dict[str, Any] = {
    "runtime": {
        "serviceCleanupTimeoutSeconds": 2.5,
        "componentHealthTimeoutSeconds": 1,
        "capabilityAvailabilityTimeoutSeconds": 0.75,
        "capabilityHealthTimeoutSeconds": 3600,
    },
    "readiness": {
        "dependencyChecks": True,
        "dependencyTimeoutSeconds": 1.5,
        "dependencyCacheSeconds": 10.0,
        "requiredModel": "gpt-4o",
    },
    "reranking": {
        "baseURL": "http://tei.models:8080",
        "credentialsSecretRef": {"name": "tei", "key": "api-key"},
    },
    "observability": {
        "metrics": False,
        "tracing": {
            "enabled": True,
            "serviceName": "chat",
            "sampleRatio": 0.001,
            "otlpEndpoint": "http://collector.observability:4318/v1/traces",
            "exportTimeoutSeconds": 5,
        },
    },
}


def test_every_setting_reaches_the_config_map_under_the_name_the_runtime_reads() -> None:
    assert data(**EVERY_SETTING) == {
        **BASE_DATA,
        "TRUSSIUM_RUNTIME__SERVICE_CLEANUP_SECONDS": "2.5",
        "TRUSSIUM_RUNTIME__COMPONENT_HEALTH_TIMEOUT_SECONDS": "1",
        "TRUSSIUM_RUNTIME__CAPABILITY_AVAILABILITY_TIMEOUT_SECONDS": "0.75",
        "TRUSSIUM_RUNTIME__CAPABILITY_HEALTH_TIMEOUT_SECONDS": "3600",
        "TRUSSIUM_READINESS__DEPENDENCY_CHECKS_ENABLED": "true",
        "TRUSSIUM_READINESS__DEPENDENCY_TIMEOUT_SECONDS": "1.5",
        "TRUSSIUM_READINESS__DEPENDENCY_CACHE_SECONDS": "10",
        "TRUSSIUM_READINESS__REQUIRED_MODEL": "gpt-4o",
        "TRUSSIUM_RERANKING__BASE_URL": "http://tei.models:8080",
        "TRUSSIUM_OBSERVABILITY__METRICS_ENABLED": "false",
        "TRUSSIUM_OBSERVABILITY__TRACING_ENABLED": "true",
        "TRUSSIUM_OBSERVABILITY__TRACING_SERVICE_NAME": "chat",
        "TRUSSIUM_OBSERVABILITY__TRACING_SAMPLE_RATIO": "0.001",
        "TRUSSIUM_OBSERVABILITY__OTLP_TRACES_ENDPOINT": "http://collector.observability:4318/v1/traces",
        "TRUSSIUM_OBSERVABILITY__OTLP_EXPORT_TIMEOUT_SECONDS": "5",
    }


@pytest.mark.parametrize(
    "spec",
    [
        {},
        {"readiness": {}},
        {"observability": {}},
        {"observability": {"tracing": {}}},
        {"runtime": {}},
    ],
    ids=["nothing", "empty-readiness", "empty-observability", "empty-tracing", "empty-runtime"],
)
def test_a_runtime_setting_none_of_them_renders_what_it_rendered_before(
    spec: dict[str, Any],
) -> None:
    rendered = objects(**spec)
    assert rendered["ConfigMap"]["data"] == BASE_DATA
    template = rendered["Deployment"]["spec"]["template"]
    checksum = template["metadata"]["annotations"][constants.CONFIG_CHECKSUM_ANNOTATION]
    assert checksum == config_checksum(BASE_DATA)
    assert template["spec"]["containers"][0]["env"] == [{"name": "TMPDIR", "value": "/tmp"}]


def test_dependency_checks_ask_for_the_provider_model_unless_another_is_named() -> None:
    on = data(readiness={"dependencyChecks": True})
    assert on["TRUSSIUM_READINESS__REQUIRED_MODEL"] == "gpt-4o-mini"
    named = data(readiness={"dependencyChecks": True, "requiredModel": "gpt-4o"})
    assert named["TRUSSIUM_READINESS__REQUIRED_MODEL"] == "gpt-4o"
    off = data(readiness={"dependencyChecks": False})
    assert off["TRUSSIUM_READINESS__DEPENDENCY_CHECKS_ENABLED"] == "false"
    assert "TRUSSIUM_READINESS__REQUIRED_MODEL" not in off
    # The default follows the provider's model: a model change re-renders (and rolls).
    moved = data(
        provider={"type": "openai", "model": "gpt-5-mini"}, readiness={"dependencyChecks": True}
    )
    assert moved["TRUSSIUM_READINESS__REQUIRED_MODEL"] == "gpt-5-mini"


def test_the_reranking_key_comes_from_its_secret_and_never_from_the_config_map() -> None:
    reranking = {
        "baseURL": "http://tei.models:8080",
        "credentialsSecretRef": {"name": "tei", "key": "api-key"},
    }
    assert env(reranking=reranking) == [
        {
            "name": "TRUSSIUM_RERANKING__API_KEY",
            "valueFrom": {"secretKeyRef": {"name": "tei", "key": "api-key"}},
        },
        {"name": "TMPDIR", "value": "/tmp"},
    ]
    assert "TRUSSIUM_RERANKING__API_KEY" not in data(reranking=reranking)
    both = env(
        provider={
            "type": "openai",
            "model": "m",
            "credentialsSecretRef": {"name": "openai", "key": "key"},
        },
        reranking=reranking,
    )
    assert [e["name"] for e in both] == [
        "TRUSSIUM_PROVIDER__API_KEY",
        "TRUSSIUM_RERANKING__API_KEY",
        "TMPDIR",
    ]
    without_key = env(reranking={"baseURL": "http://tei.models:8080"})
    assert without_key == [{"name": "TMPDIR", "value": "/tmp"}]


def test_the_reranking_secret_is_a_referenced_secret() -> None:
    runtime = TrussiumRuntime.model_validate(manifest(**EVERY_SETTING))
    assert referenced_secret_names(runtime.spec) == ["tei"]
    result = validate_runtime(manifest(**EVERY_SETTING))
    assert result.secret_paths == {"tei": "spec.reranking.credentialsSecretRef.name"}


def test_the_dependency_timeout_must_end_within_the_readiness_probe() -> None:
    probe_timeout = constants.READINESS_PROBE_TIMING[1]

    def errors(seconds: object) -> list[tuple[str, str]]:
        result = validate_runtime(manifest(readiness={"dependencyTimeoutSeconds": seconds}))
        return [(e.path, e.message) for e in result.errors]

    assert errors(probe_timeout - 0.001) == []
    assert errors(0.25) == []
    path = "spec.readiness.dependencyTimeoutSeconds"
    assert errors(probe_timeout) == [(path, f"must be less than {probe_timeout}")]
    assert errors(30) == [(path, f"must be less than {probe_timeout}")]
    assert errors(0) == [(path, "must be greater than 0")]
    assert errors("1") == [(path, "must be a number")]
    node = openapi_schema()["properties"]["spec"]["properties"]["readiness"]["properties"][
        "dependencyTimeoutSeconds"
    ]
    assert node == node | {
        "type": "number",
        "minimum": 0,
        "exclusiveMinimum": True,
        "maximum": probe_timeout,
        "exclusiveMaximum": True,
    }


@pytest.mark.parametrize(
    ("spec", "path", "message"),
    [
        (
            {"runtime": {"serviceCleanupTimeoutSeconds": 3600.5}},
            "spec.runtime.serviceCleanupTimeoutSeconds",
            "must be less than or equal to 3600",
        ),
        (
            {"readiness": {"dependencyCacheSeconds": -1}},
            "spec.readiness.dependencyCacheSeconds",
            "must be greater than 0",
        ),
        (
            {"readiness": {"dependencyChecks": "true"}},
            "spec.readiness.dependencyChecks",
            "must be a boolean",
        ),
        (
            {"readiness": {"requiredModel": " gpt-4o"}},
            "spec.readiness.requiredModel",
            "invalid value ' gpt-4o': must be a name without leading or trailing whitespace",
        ),
        (
            {"observability": {"tracing": {"sampleRatio": 1.5}}},
            "spec.observability.tracing.sampleRatio",
            "must be less than or equal to 1",
        ),
        (
            {"observability": {"tracing": {"serviceName": ""}}},
            "spec.observability.tracing.serviceName",
            "must not be empty",
        ),
        (
            {"observability": {"tracing": {"otlpEndpoint": "collector:4318"}}},
            "spec.observability.tracing.otlpEndpoint",
            "must be an absolute http or https URL with a host",
        ),
        (
            {"reranking": {"credentialsSecretRef": {"name": "tei", "key": "k"}}},
            "spec.reranking.baseURL",
            "Required value",
        ),
        (
            {"reranking": {"baseURL": "grpc://tei:8080"}},
            "spec.reranking.baseURL",
            "must be an absolute http or https URL with a host",
        ),
        (
            {"reranking": {"baseURL": "http://user:s3cret@tei:8080"}},
            "spec.reranking.baseURL",
            "must not contain user credentials; put the API key in a Secret and reference it "
            "with spec.reranking.credentialsSecretRef",
        ),
        (
            {"observability": {"tracing": {"otlpEndpoint": "http://user:s3cret@c:4318/v1/traces"}}},
            "spec.observability.tracing.otlpEndpoint",
            "must not contain user credentials; the runtime sends traces without credentials",
        ),
        (
            {"observability": {"logs": True}},
            "spec.observability.logs",
            "unknown field 'logs': not part of the TrussiumRuntime API (see docs/api-reference.md)",
        ),
    ],
)
def test_out_of_bounds_settings_are_refused(spec: dict[str, Any], path: str, message: str) -> None:
    result = validate_runtime(manifest(**spec))
    assert [(e.path, e.message) for e in result.errors] == [(path, message)]
    assert "s3cret" not in repr(result.errors)
