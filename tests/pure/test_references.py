"""The Secrets a runtime refers to, which must exist before anything is applied."""

from typing import Any

import pytest

from trussium_operator.common.api import TrussiumRuntimeSpec
from trussium_operator.common.references import referenced_secret_names


def spec(**fields: Any) -> TrussiumRuntimeSpec:
    provider = {"type": "openai", "model": "m"} | fields.pop("provider", {})
    return TrussiumRuntimeSpec.model_validate(
        {"image": {"repository": "r", "tag": "1"}, "provider": provider} | fields
    )


@pytest.mark.parametrize(
    ("fields", "names"),
    [
        ({}, []),
        ({"provider": {"credentialsSecretRef": {"name": "openai", "key": "k"}}}, ["openai"]),
        ({"imagePullSecrets": [{"name": "reg-b"}, {"name": "reg-a"}]}, ["reg-a", "reg-b"]),
        (
            {
                "provider": {"credentialsSecretRef": {"name": "shared", "key": "k"}},
                "imagePullSecrets": [{"name": "zeta"}, {"name": "shared"}],
            },
            ["shared", "zeta"],
        ),
    ],
    ids=["none", "credentials", "pull-secrets-sorted", "unique"],
)
def test_referenced_secret_names(fields: dict[str, Any], names: list[str]) -> None:
    assert referenced_secret_names(spec(**fields)) == names
