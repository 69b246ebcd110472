"""Provider settings the runtime accepts but cannot serve with (docs/contract.md section 13):
a warning from the webhook and the offline validator, and on a stored runtime the
`ConfigurationWarnings` condition; never a denial, never the URL repeated."""

import copy
from typing import Any

import pytest

from trussium_operator.common.events import decide_events
from trussium_operator.common.status import Outcome, compute_status
from trussium_operator.common.validation import validate_runtime
from trussium_operator.controller.machinery.names import NamespacedName
from trussium_operator.controller.runtime.validated import ValidGenerations
from trussium_operator.offline.checks import check_documents

CREDENTIALS = {"name": "openai", "key": "api-key"}
NO_V1 = (
    "spec.provider.baseURL: the runtime calls <baseURL>/responses and <baseURL>/models, and "
    "Ollama serves them under /v1: end the URL in /v1, e.g. http://ollama.models:11434/v1"
)
LOOPBACK = (
    "spec.provider.baseURL: unset, so the runtime calls http://127.0.0.1:11434/v1, inside its "
    "own Pod, where no Ollama runs; set the Ollama server's URL, e.g. "
    "http://ollama.models:11434/v1"
)
NO_PATH = (
    "spec.provider.baseURL: has no path, but the runtime calls <baseURL>/responses and "
    "<baseURL>/models, and OpenAI-compatible servers serve them under a path such as /v1 "
    "(OpenAI's own: https://api.openai.com/v1)"
)
NO_KEY = (
    "spec.provider.credentialsSecretRef: unset, so the runtime has no API key and serves no "
    "chat: it builds no OpenAI client without one. Reference the key's Secret (a server that "
    "needs no key takes any value)"
)


def manifest(**provider: Any) -> dict[str, Any]:
    return {
        "apiVersion": "runtime.trussium.io/v1alpha1",
        "kind": "TrussiumRuntime",
        "metadata": {"name": "chat", "namespace": "team-a", "uid": "u-1", "generation": 1},
        "spec": {
            "image": {"repository": "ghcr.io/trussiumhq/trussium", "tag": "1.4.2"},
            "provider": {"model": "m", **provider},
        },
    }


@pytest.mark.parametrize(
    ("provider", "warnings"),
    [
        ({"type": "ollama", "baseURL": "http://ollama.models:11434/v1"}, []),
        ({"type": "ollama", "baseURL": "http://ollama.models:11434/v1/"}, []),
        ({"type": "ollama", "baseURL": "https://gateway.example/ollama/v1"}, []),
        ({"type": "ollama", "baseURL": "http://ollama.models:11434"}, [NO_V1]),
        ({"type": "ollama", "baseURL": "http://ollama.models:11434/"}, [NO_V1]),
        ({"type": "ollama", "baseURL": "http://ollama.models:11434/api"}, [NO_V1]),
        ({"type": "ollama", "baseURL": "http://ollama.models:11434/v1/chat"}, [NO_V1]),
        ({"type": "ollama"}, [LOOPBACK]),
        ({"type": "openai", "credentialsSecretRef": CREDENTIALS}, []),
        (
            {
                "type": "openai",
                "baseURL": "http://vllm.models:8000/v1",
                "credentialsSecretRef": CREDENTIALS,
            },
            [],
        ),
        (
            {
                "type": "openai",
                "baseURL": "http://vllm.models:8000",
                "credentialsSecretRef": CREDENTIALS,
            },
            [NO_PATH],
        ),
        ({"type": "openai"}, [NO_KEY]),
        ({"type": "openai", "baseURL": "http://vllm.models:8000/"}, [NO_PATH, NO_KEY]),
    ],
)
def test_the_webhook_warns_and_admits(provider: dict[str, Any], warnings: list[str]) -> None:
    result = validate_runtime(manifest(**provider))
    assert result.allowed
    assert list(result.warnings) == warnings


def test_a_warning_never_repeats_the_url() -> None:
    stored = manifest(type="ollama", baseURL="http://admin:s3cret@ollama.models:11434")
    result = validate_runtime(stored, stored=True)
    assert [e.rule for e in result.errors] == ["BaseURLCredentials"]
    assert list(result.warnings) == [NO_V1]
    assert "s3cret" not in repr(result.warnings)


def test_a_url_the_schema_refuses_is_reported_once_by_its_rule() -> None:
    result = validate_runtime(manifest(type="ollama", baseURL="localhost:11434"), stored=True)
    assert [e.rule for e in result.errors] == ["BaseURLNotHTTP"]
    assert result.warnings == ()


def test_an_update_keeps_the_warning() -> None:
    old = manifest(type="ollama")
    new = copy.deepcopy(old)
    new["spec"]["replicas"] = 2
    result = validate_runtime(new, old)
    assert (result.allowed, result.warnings) == (True, (LOOPBACK,))


def test_the_offline_validator_warns_and_fails_only_when_strict() -> None:
    report = check_documents([("f.yaml", manifest(type="ollama"))])
    assert [(f.severity, f.field, f.message) for f in report.findings] == [
        ("warning", "spec.provider.baseURL", LOOPBACK.removeprefix("spec.provider.baseURL: "))
    ]
    assert not report.failing(strict=False)
    assert report.failing(strict=True)


def stored_status(obj: dict[str, Any]) -> dict[str, Any]:
    runtime, errors, warnings = ValidGenerations().parse(NamespacedName("team-a", "chat"), obj)
    assert runtime is not None
    assert errors == ()
    return compute_status(
        runtime,
        deployment=None,
        service=None,
        outcome=Outcome(),
        now="2026-01-01T00:00:00Z",
        warnings=warnings,
    )


def warnings_condition(status: dict[str, Any]) -> dict[str, Any] | None:
    return next((c for c in status["conditions"] if c["type"] == "ConfigurationWarnings"), None)


def test_a_stored_runtime_gets_the_warnings_condition_and_one_event() -> None:
    status = stored_status(manifest(type="ollama", baseURL="http://ollama.models:11434"))
    condition = warnings_condition(status)
    assert condition is not None
    assert (condition["status"], condition["reason"]) == ("True", "AcceptedWithWarnings")
    assert condition["message"] == (
        f"The runtime is reconciled, but its provider settings look wrong: {NO_V1}. "
        "Fix the spec to clear this."
    )
    (event,) = [d for d in decide_events(None, status) if d.reason == "AcceptedWithWarnings"]
    assert (event.type, event.note) == ("Warning", condition["message"])


def test_the_condition_lists_broken_rules_first_then_provider_settings() -> None:
    obj = manifest(type="ollama", baseURL="http://admin:s3cret@ollama.models:11434")
    condition = warnings_condition(stored_status(obj))
    assert condition is not None
    message = condition["message"]
    assert message.startswith(
        "The spec breaks rules a new runtime must meet; it is reconciled as the Go operator "
        "reconciled it: spec.provider.baseURL: must not contain user credentials"
    )
    assert "[BaseURLCredentials]. The runtime is reconciled, but its provider settings look " in (
        message
    )
    assert message.endswith(f"{NO_V1}. Fix the spec to clear this.")
    assert "s3cret" not in message


def test_a_runtime_its_provider_can_serve_has_no_warnings_condition() -> None:
    obj = manifest(type="ollama", baseURL="http://ollama.models:11434/v1")
    assert warnings_condition(stored_status(obj)) is None
