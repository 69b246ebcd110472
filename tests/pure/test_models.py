"""The API models: rendering, defaults in memory and the cross-field rules."""

from typing import Any

import pytest
from pydantic import ValidationError

from trussium_operator.common.api import ImageSpec, TrussiumRuntime, TrussiumRuntimeSpec
from trussium_operator.common.defaulting import apply_defaults
from trussium_operator.common.images import render_image

DIGEST = "sha256:" + "b" * 64


def test_render_image_with_tag_or_digest() -> None:
    assert render_image(ImageSpec(repository="ghcr.io/t/rt", tag="1.2")) == "ghcr.io/t/rt:1.2"
    assert render_image(ImageSpec(repository="ghcr.io/t/rt", digest=DIGEST)) == (
        f"ghcr.io/t/rt@{DIGEST}"
    )


def _spec(**extra: Any) -> dict[str, Any]:
    return {
        "image": {"repository": "rt", "tag": "1"},
        "provider": {"type": "ollama", "model": "m"},
        **extra,
    }


def test_in_memory_defaults_match_the_defaulted_wire_object() -> None:
    model = TrussiumRuntimeSpec.model_validate(_spec())
    wire = apply_defaults({"spec": _spec()}).object["spec"]
    assert model.model_dump(by_alias=True, exclude_none=True) == wire


def test_wire_names_are_camel_case_with_the_contract_spellings() -> None:
    spec = TrussiumRuntimeSpec.model_validate(
        _spec(
            provider={"type": "openai", "model": "m", "baseURL": "http://x:1"},
            autoscaling={"targetCPUUtilizationPercentage": 50},
            imagePullSecrets=[{"name": "r"}],
        )
    )
    assert spec.provider.base_url == "http://x:1"
    assert spec.autoscaling is not None
    assert spec.autoscaling.target_cpu_utilization_percentage == 50
    assert spec.image_pull_secrets is not None


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"image": {"repository": "rt"}}, "exactly one of tag or digest must be specified"),
        ({"networkPolicy": {"enabled": True}}, "at least one ingress rule is required"),
        ({"autoscaling": {"minReplicas": 20}}, "maxReplicas must be greater than or equal"),
        ({"replicas": "2"}, "valid integer"),
        ({"podSpec": {}}, "Extra inputs are not permitted"),
    ],
)
def test_models_reject_what_the_crd_rejects(extra: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        TrussiumRuntimeSpec.model_validate(_spec(**extra))


def test_runtime_read_from_the_api_server_ignores_unknown_metadata() -> None:
    runtime = TrussiumRuntime.model_validate(
        {
            "apiVersion": "runtime.trussium.io/v1alpha1",
            "kind": "TrussiumRuntime",
            "metadata": {"name": "rt", "namespace": "ns", "generation": 2, "labels": {"a": "b"}},
            "spec": _spec(),
            "status": {"conditions": [], "readyReplicas": 1},
        }
    )
    assert runtime.metadata.generation == 2
    assert runtime.status == {"conditions": [], "readyReplicas": 1}
