"""The defaulting hook: a minimal JSONPatch, and none once the defaults are there."""

import pytest

from tests.support.json_patch import apply_json_patch

from .conftest import Client
from .reviews import patch_of, response, review, runtime, sample

PATH = "/mutate-trussiumruntime"


async def test_defaults_are_added_with_a_minimal_patch(client: Client) -> None:
    answer = await (await client.post(PATH, json=review(runtime()))).json()
    result = response(answer)
    assert result["allowed"] is True
    assert patch_of(result) == [
        {"op": "add", "path": "/spec/image/pullPolicy", "value": "IfNotPresent"},
        {"op": "add", "path": "/spec/replicas", "value": 1},
        {"op": "add", "path": "/spec/service", "value": {"type": "ClusterIP", "port": 9000}},
    ]


async def test_nested_defaults_apply_only_inside_present_sections(client: Client) -> None:
    obj = runtime(autoscaling={"enabled": False}, networkPolicy={"ingress": []})
    result = response(await (await client.post(PATH, json=review(obj))).json())
    paths = {op["path"] for op in patch_of(result)}
    assert {
        "/spec/autoscaling/minReplicas",
        "/spec/autoscaling/maxReplicas",
        "/spec/autoscaling/targetCPUUtilizationPercentage",
        "/spec/networkPolicy/enabled",
    } <= paths
    assert not any(path.startswith("/spec/runtime") for path in paths)


@pytest.mark.parametrize(
    "path", ["valid/minimal.yaml", "valid/production.yaml", "valid/ollama-with-configmap.yaml"]
)
async def test_patch_is_idempotent(client: Client, path: str) -> None:
    obj = sample(path)
    first = response(await (await client.post(PATH, json=review(obj))).json())
    defaulted = apply_json_patch(obj, patch_of(first))
    again = response(await (await client.post(PATH, json=review(defaulted))).json())
    assert again == {"uid": "7d6c-uid", "allowed": True}


async def test_update_and_dry_run_are_defaulted_alike(client: Client) -> None:
    plain = response(await (await client.post(PATH, json=review(runtime()))).json())
    update = review(runtime(), old=runtime(), operation="UPDATE", dry_run=True)
    assert response(await (await client.post(PATH, json=update)).json()) == plain


async def test_delete_is_allowed_untouched(client: Client) -> None:
    body = review(None, old=runtime(), operation="DELETE")
    assert response(await (await client.post(PATH, json=body)).json()) == {
        "uid": "7d6c-uid",
        "allowed": True,
    }


async def test_a_runtime_over_a_bound_is_left_to_the_schema(client: Client) -> None:
    """ADR 0027: defaulting all of it would cost what the bounds prevent; the API server's
    schema (after this hook) or the validating hook refuses it."""
    tolerations = [{"key": f"pool-{i}", "operator": "Exists"} for i in range(65)]
    obj = runtime(scheduling={"tolerations": tolerations})
    result = response(await (await client.post(PATH, json=review(obj))).json())
    assert result == {"uid": "7d6c-uid", "allowed": True}
    within = runtime(scheduling={"tolerations": tolerations[:64]})
    result = response(await (await client.post(PATH, json=review(within))).json())
    assert patch_of(result), "within its bounds it is defaulted"
