"""Input the API server would never send still gets a clear answer, never a traceback."""

import json

import pytest

from .conftest import MAX_REQUEST_BYTES, Client
from .reviews import response, review, runtime

HOOKS = ["/mutate-trussiumruntime", "/validate-trussiumruntime", "/validate-managed-deployment"]


@pytest.mark.parametrize("path", HOOKS)
@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"{not json", "request body is not JSON"),
        (b"", "request body is not JSON"),
        (b'"AdmissionReview"', "must be a JSON object"),
        (b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}', "no request"),
        (b'{"kind": "AdmissionReview", "request": {"kind": {}}}', "expected apiVersion"),
    ],
)
async def test_body_without_uid_is_a_json_400(
    client: Client, path: str, body: bytes, message: str
) -> None:
    answer = await client.post(path, data=body, headers={"Content-Type": "application/json"})
    assert answer.status == 400
    error = await answer.json()
    assert error["code"] == 400
    assert message in error["error"]


@pytest.mark.parametrize("path", HOOKS)
async def test_wrong_version_with_uid_is_answered_in_the_review(client: Client, path: str) -> None:
    body = review(runtime()) | {"apiVersion": "admission.k8s.io/v1beta1"}
    answer = await client.post(path, json=body)
    assert answer.status == 200
    result = response(await answer.json())
    assert result["allowed"] is False
    assert result["status"]["code"] == 400
    assert "admission.k8s.io/v1" in result["status"]["message"]


@pytest.mark.parametrize("path", HOOKS[:2])
async def test_wrong_kind_is_a_clear_400(client: Client, path: str) -> None:
    body = review(runtime(), kind={"group": "", "version": "v1", "kind": "Pod"})
    result = response(await (await client.post(path, json=body)).json())
    assert result["status"]["code"] == 400
    assert "runtime.trussium.io/v1alpha1 TrussiumRuntime, not v1 Pod" in result["status"]["message"]


@pytest.mark.parametrize("path", HOOKS[:2])
async def test_create_without_object_is_a_clear_400(client: Client, path: str) -> None:
    body = review(None)
    result = response(await (await client.post(path, json=body)).json())
    assert result["status"]["code"] == 400
    assert "needs an object" in result["status"]["message"]


@pytest.mark.parametrize("path", HOOKS)
async def test_huge_body_is_a_413_naming_the_limit(client: Client, path: str) -> None:
    obj = runtime(podMetadata={"annotations": {"big": "x" * MAX_REQUEST_BYTES}})
    answer = await client.post(path, data=json.dumps(review(obj)))
    assert answer.status == 413
    error = await answer.json()
    assert str(MAX_REQUEST_BYTES) in error["error"]


async def test_unknown_path_and_method_are_json_errors(client: Client) -> None:
    missing = await client.post("/validate-pods", json={})
    assert missing.status == 404
    assert (await missing.json())["code"] == 404
    wrong_method = await client.get(HOOKS[0])
    assert wrong_method.status == 405
    assert (await wrong_method.json())["code"] == 405


async def test_a_failing_decision_is_a_plain_500_so_the_failure_policy_applies(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("secret detail that must not leak")

    monkeypatch.setattr("trussium_operator.webhook.app.validate_runtime", broken)
    answer = await client.post("/validate-trussiumruntime", json=review(runtime()))
    assert answer.status == 500
    error = await answer.json()
    assert error == {"code": 500, "error": "internal error in the trussium webhook; see its logs"}
