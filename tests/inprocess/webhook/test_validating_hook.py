"""The validating hook: every rule, all violations at once, warnings and ratcheting."""

import asyncio
from typing import Any

import pytest

from .conftest import Client, MakeClient
from .reviews import SAMPLES, causes, response, review, runtime, sample

PATH = "/validate-trussiumruntime"

# Each invalid sample and the field paths its denial must name.
INVALID = {
    "tag-and-digest.yaml": {"spec.image"},
    "replicas-out-of-range.yaml": {"spec.replicas"},
    "unknown-field.yaml": {"spec.containers"},
    "operator-owned-metadata.yaml": {
        "spec.podMetadata.labels[app.kubernetes.io/managed-by]",
        "spec.podMetadata.annotations[runtime.trussium.io/config-checksum]",
    },
    "security-annotations.yaml": {
        "spec.podMetadata.annotations[container.apparmor.security.beta.kubernetes.io/trussium]",
        "spec.podMetadata.annotations[seccomp.security.alpha.kubernetes.io/pod]",
    },
    "bad-scheduling.yaml": {
        "spec.scheduling.nodeSelector",
        "spec.scheduling.tolerations[0].value",
        "spec.scheduling.affinity",
    },
    "requests-exceed-limits.yaml": {"spec.resources.requests"},
    "base-url-credentials.yaml": {"spec.provider.baseURL"},
    "autoscaling.yaml": {"spec.autoscaling", "spec.autoscaling.enabled"},
    "network-policy-without-ingress.yaml": {"spec.networkPolicy"},
    "autoscaling-without-cpu.yaml": {"spec.autoscaling.enabled"},
    "scratch-over-ephemeral-limit.yaml": {"spec.scratch.sizeLimit"},
    "service-annotations.yaml": {
        "spec.service.annotations[runtime.trussium.io/config-checksum]",
        "spec.service.loadBalancerSourceRanges[0]",
    },
    "service-load-balancer-fields.yaml": {"spec.service"},
}


async def post(client: Client, body: dict[str, Any]) -> dict[str, Any]:
    return response(await (await client.post(PATH, json=body)).json())


def test_every_invalid_sample_is_covered() -> None:
    assert {path.name for path in (SAMPLES / "invalid").glob("*.yaml")} == set(INVALID)


@pytest.mark.parametrize("path", sorted(p.name for p in (SAMPLES / "valid").glob("*.yaml")))
async def test_valid_samples_are_allowed(client: Client, path: str) -> None:
    assert (await post(client, review(sample(f"valid/{path}"))))["allowed"] is True


@pytest.mark.parametrize(("path", "fields"), sorted(INVALID.items()))
async def test_invalid_samples_are_denied_naming_each_field(
    client: Client, path: str, fields: set[str]
) -> None:
    result = await post(client, review(sample(f"invalid/{path}")))
    assert result["allowed"] is False
    found = causes(result)
    for field in fields:
        assert any(cause.startswith(field) for cause in found), (field, found)
    status = result["status"]
    assert status["details"]["kind"] == "TrussiumRuntime"
    assert status["details"]["group"] == "runtime.trussium.io"
    assert status["details"]["name"] == sample(f"invalid/{path}")["metadata"]["name"]


async def test_credentials_in_base_url_are_never_echoed(client: Client) -> None:
    result = await post(client, review(sample("invalid/base-url-credentials.yaml")))
    assert "s3cret" not in str(result)


async def test_all_violations_are_reported_at_once(client: Client) -> None:
    obj = runtime(replicas=-1, provider={"type": "azure", "model": ""})
    found = causes(await post(client, review(obj)))
    assert {"spec.replicas", "spec.provider.type", "spec.provider.model"} <= set(found)


async def test_mutable_tag_is_a_warning(client: Client) -> None:
    result = await post(client, review(sample("valid/latest-tag.yaml")))
    assert result["allowed"] is True
    assert any("latest" in warning for warning in result["warnings"])


async def test_replicas_with_autoscaling_is_a_warning(client: Client) -> None:
    obj = runtime(replicas=3, autoscaling={"enabled": True}, resources={"requests": {"cpu": "1"}})
    result = await post(client, review(obj))
    assert result["allowed"] is True
    assert any(warning.startswith("spec.replicas") for warning in result["warnings"])


async def test_dry_run_gets_the_same_verdict(client: Client) -> None:
    obj = sample("invalid/autoscaling.yaml")
    assert await post(client, review(obj, dry_run=True)) == await post(client, review(obj))


async def test_update_keeps_an_old_violation_as_a_warning(client: Client) -> None:
    old = runtime(podMetadata={"labels": {"app.kubernetes.io/name": "legacy"}})
    new = runtime(replicas=2, podMetadata={"labels": {"app.kubernetes.io/name": "legacy"}})
    result = await post(client, review(new, old=old, operation="UPDATE"))
    assert result["allowed"] is True
    assert any("app.kubernetes.io/name" in warning for warning in result["warnings"])


async def test_update_introducing_a_violation_is_denied(client: Client) -> None:
    new = runtime(podMetadata={"labels": {"app.kubernetes.io/name": "mine"}})
    result = await post(client, review(new, old=runtime(), operation="UPDATE"))
    assert result["allowed"] is False


async def test_create_does_not_ratchet_against_old_object(client: Client) -> None:
    violating = runtime(podMetadata={"labels": {"app.kubernetes.io/name": "x"}})
    result = await post(client, review(violating, old=violating, operation="CREATE"))
    assert result["allowed"] is False


def referencing() -> dict[str, Any]:
    return runtime(
        imagePullSecrets=[{"name": "pull"}],
        provider={
            "type": "openai",
            "model": "m",
            "credentialsSecretRef": {"name": "openai", "key": "api-key"},
        },
    )


async def test_missing_secret_is_a_warning(make_client: MakeClient) -> None:
    asked: list[str] = []

    async def names(namespace: str) -> frozenset[str]:
        asked.append(namespace)
        return frozenset({"pull"})

    client = await make_client(secret_names=names)
    result = await post(client, review(referencing()))
    assert asked == ["team-a"]
    assert result["allowed"] is True
    secret_warnings = [w for w in result["warnings"] if "Secret" in w]
    assert len(secret_warnings) == 1
    assert "'openai'" in secret_warnings[0]


async def test_secrets_are_not_listed_without_references(make_client: MakeClient) -> None:
    async def names(namespace: str) -> frozenset[str]:
        raise AssertionError("listed Secrets for a runtime that references none")

    client = await make_client(secret_names=names)
    assert (await post(client, review(runtime())))["allowed"] is True


@pytest.mark.parametrize("failure", ["error", "timeout"])
async def test_secret_lookup_failure_never_fails_admission(
    make_client: MakeClient, failure: str
) -> None:
    async def names(namespace: str) -> frozenset[str]:
        if failure == "timeout":
            await asyncio.sleep(10)
        raise ConnectionError("API server unreachable")

    client = await make_client(secret_names=names, secret_lookup_timeout=0.05)
    result = await post(client, review(referencing()))
    assert result["allowed"] is True
    assert not any("Secret" in warning for warning in result.get("warnings", ()))
