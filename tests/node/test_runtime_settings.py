"""Every runtime setting the API offers reaches the runtime's process (docs/contract.md
section 13): on a real node, the environment of the running container holds each
one under the name the runtime reads, the reranking key from its Secret."""

import hashlib
from pathlib import Path

import pytest

from devcluster import ControlPlane
from devcluster.controller_harness import apply
from tests.node.pods import QUICK_DRAIN, container_process, run_standin

pytestmark = [pytest.mark.node, pytest.mark.usefixtures("standin", "controller")]
TEI_KEY = "tei-key-for-the-settings-test"
EVERY_SETTING = {
    "provider": {"type": "ollama", "model": "llama3.2", "baseURL": "http://127.0.0.1:11434/v1"},
    "readiness": {
        "dependencyTimeoutSeconds": 0.5,
        "dependencyCacheSeconds": 30,
        "requiredModel": "llama3.2:1b",
    },
    "reranking": {
        "baseURL": "http://127.0.0.1:8080",
        "credentialsSecretRef": {"name": "tei", "key": "token"},
    },
    "observability": {
        "metrics": False,
        "tracing": {
            "enabled": True,
            "serviceName": "chat-gateway",
            "sampleRatio": 0.25,
            "otlpEndpoint": "http://127.0.0.1:4318/v1/traces",
            "exportTimeoutSeconds": 5,
        },
    },
    "runtime": QUICK_DRAIN
    | {
        "serviceCleanupTimeoutSeconds": 7,
        "componentHealthTimeoutSeconds": 1.5,
        "capabilityAvailabilityTimeoutSeconds": 2,
        "capabilityHealthTimeoutSeconds": 3,
    },
}
# The names and values the runtime's settings model reads, as the contract writes them.
EXPECTED = {
    "TRUSSIUM_READINESS__DEPENDENCY_TIMEOUT_SECONDS": "0.5",
    "TRUSSIUM_READINESS__DEPENDENCY_CACHE_SECONDS": "30",
    "TRUSSIUM_READINESS__REQUIRED_MODEL": "llama3.2:1b",
    "TRUSSIUM_RERANKING__BASE_URL": "http://127.0.0.1:8080",
    "TRUSSIUM_OBSERVABILITY__METRICS_ENABLED": "false",
    "TRUSSIUM_OBSERVABILITY__TRACING_ENABLED": "true",
    "TRUSSIUM_OBSERVABILITY__TRACING_SERVICE_NAME": "chat-gateway",
    "TRUSSIUM_OBSERVABILITY__TRACING_SAMPLE_RATIO": "0.25",
    "TRUSSIUM_OBSERVABILITY__OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces",
    "TRUSSIUM_OBSERVABILITY__OTLP_EXPORT_TIMEOUT_SECONDS": "5",
    "TRUSSIUM_RUNTIME__SERVICE_CLEANUP_SECONDS": "7",
    "TRUSSIUM_RUNTIME__COMPONENT_HEALTH_TIMEOUT_SECONDS": "1.5",
    "TRUSSIUM_RUNTIME__CAPABILITY_AVAILABILITY_TIMEOUT_SECONDS": "2",
    "TRUSSIUM_RUNTIME__CAPABILITY_HEALTH_TIMEOUT_SECONDS": "3",
}


def environment(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    pairs = (item.decode().partition("=") for item in raw if item)
    return {key: value for key, _, value in pairs}


def digest(value: str | None) -> str:
    """What an assertion may show of a key: never the key."""
    return hashlib.sha256((value or "").encode()).hexdigest()[:12]


def test_every_setting_reaches_the_runtime_process(plane: ControlPlane, namespace: str) -> None:
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "tei", "namespace": namespace},
        "stringData": {"token": TEI_KEY},
    }
    apply(plane, secret)
    pod = run_standin(plane, "settings", namespace, **EVERY_SETTING)
    env = environment(container_process(plane, pod))
    assert {key: env.get(key) for key in EXPECTED} == EXPECTED
    assert digest(env.get("TRUSSIUM_RERANKING__API_KEY")) == digest(TEI_KEY)
    # Off unless asked: the runtime's own default (no provider-gated readiness) holds.
    assert "TRUSSIUM_READINESS__DEPENDENCY_CHECKS_ENABLED" not in env


def test_a_runtime_without_the_settings_gets_none_of_them(
    plane: ControlPlane, namespace: str
) -> None:
    pod = run_standin(plane, "plain", namespace)
    env = environment(container_process(plane, pod))
    offered = set(EXPECTED) | {
        "TRUSSIUM_RERANKING__API_KEY",
        "TRUSSIUM_READINESS__DEPENDENCY_CHECKS_ENABLED",
    }
    assert offered.isdisjoint(env)
