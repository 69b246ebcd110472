"""The managed-Deployment hook over HTTP: per principal, per operation, per field."""

from typing import Any

from tests.support.deployments import managed_deployment

from .conftest import Client
from .reviews import DEPLOYMENT_KIND, OPERATOR, RUNTIME_KIND, response, review

PATH = "/validate-managed-deployment"


def with_sidecar() -> dict[str, Any]:
    edited = managed_deployment()
    edited["spec"]["template"]["spec"]["containers"].append(
        {"name": "debug", "image": "busybox", "securityContext": {"privileged": True}}
    )
    return edited


async def post(client: Client, body: dict[str, Any]) -> dict[str, Any]:
    return response(await (await client.post(PATH, json=body)).json())


async def test_admin_sidecar_is_refused_with_guidance(client: Client) -> None:
    body = review(
        with_sidecar(),
        old=managed_deployment(),
        operation="UPDATE",
        kind=DEPLOYMENT_KIND,
        username="admin",
    )
    result = await post(client, body)
    assert result["allowed"] is False
    assert result["status"]["code"] == 403
    assert result["status"]["reason"] == "Forbidden"
    message = result["status"]["message"]
    assert "TrussiumRuntime team-a/chat" in message
    assert "spec.template.spec.containers" in message


async def test_operator_is_allowed(client: Client) -> None:
    body = review(
        with_sidecar(),
        old=managed_deployment(),
        operation="UPDATE",
        kind=DEPLOYMENT_KIND,
        username=OPERATOR,
    )
    assert (await post(client, body))["allowed"] is True


async def test_rollout_restart_is_allowed_even_in_dry_run(client: Client) -> None:
    restarted = managed_deployment()
    # What `kubectl rollout restart` adds, beside the operator's own annotations.
    annotations = restarted["spec"]["template"]["metadata"]["annotations"]
    annotations["kubectl.kubernetes.io/restartedAt"] = "2026-11-29T10:00:00Z"
    body = review(
        restarted,
        old=managed_deployment(),
        operation="UPDATE",
        kind=DEPLOYMENT_KIND,
        username="admin",
        dry_run=True,
    )
    assert (await post(client, body))["allowed"] is True


async def test_other_operations_are_not_judged(client: Client) -> None:
    for operation in ("CREATE", "DELETE"):
        body = review(
            managed_deployment(), operation=operation, kind=DEPLOYMENT_KIND, username="admin"
        )
        assert (await post(client, body))["allowed"] is True


async def test_a_runtime_sent_to_the_guard_is_a_clear_400(client: Client) -> None:
    body = review(
        managed_deployment(), old=managed_deployment(), operation="UPDATE", kind=RUNTIME_KIND
    )
    result = await post(client, body)
    assert result["allowed"] is False
    assert result["status"]["code"] == 400
    assert "apps/v1 Deployments" in result["status"]["message"]


async def test_update_without_old_object_is_a_clear_400(client: Client) -> None:
    body = review(managed_deployment(), operation="UPDATE", kind=DEPLOYMENT_KIND)
    result = await post(client, body)
    assert result["status"]["code"] == 400
    assert "oldObject" in result["status"]["message"]
