"""One admission parses the runtime once; the old object only when ratcheting needs it."""

from typing import Any

import pytest

from tests.support.parse_count import counting_parses

from .conftest import MakeClient
from .reviews import response, review, runtime

VALIDATE = "/validate-trussiumruntime"
MUTATE = "/mutate-trussiumruntime"
BAD_LABEL = {"labels": {"app.kubernetes.io/name": "mine"}}
REFERENCING = {
    "imagePullSecrets": [{"name": "pull"}],
    "provider": {"type": "openai", "model": "m", "credentialsSecretRef": {"name": "k", "key": "v"}},
}
MISSING_SECRET = (
    "spec.provider.credentialsSecretRef.name: Secret 'k' does not exist in this namespace yet; "
    "the runtime is not deployed until it does"
)


async def names(namespace: str) -> frozenset[str]:
    return frozenset({"pull"})


@pytest.mark.parametrize(
    ("body", "parsed", "allowed"),
    [
        (review(runtime(**REFERENCING)), ["object"], True),
        (review(runtime(podMetadata=BAD_LABEL, **REFERENCING)), ["object"], False),
        (review(runtime(replicas=2), old=runtime(), operation="UPDATE"), ["object"], True),
        (
            review(runtime(podMetadata=BAD_LABEL), old=runtime(), operation="UPDATE"),
            ["object", "oldObject"],
            False,
        ),
        (
            review(runtime(podMetadata=BAD_LABEL, replicas=2), old=runtime(podMetadata=BAD_LABEL)),
            ["object"],
            False,
        ),
        (
            review(
                runtime(podMetadata=BAD_LABEL, replicas=2, **REFERENCING),
                old=runtime(podMetadata=BAD_LABEL),
                operation="UPDATE",
            ),
            ["object", "oldObject"],
            True,
        ),
    ],
    ids=[
        "create-with-secret-lookup",
        "create-denied-with-secret-lookup",
        "update-allowed-old-not-parsed",
        "update-denied",
        "create-never-ratchets",
        "update-ratcheted-with-secret-lookup",
    ],
)
async def test_parses_per_validating_admission(
    make_client: MakeClient, body: dict[str, Any], parsed: list[str], allowed: bool
) -> None:
    client = await make_client(secret_names=names)
    with counting_parses() as parses:
        answer = response(await (await client.post(VALIDATE, json=body)).json())
    assert answer["allowed"] is allowed
    assert parses.objects == [body["request"][key] for key in parsed]
    assert parses.spec_models == len(parsed)
    if "credentialsSecretRef" in body["request"]["object"]["spec"]["provider"]:
        assert MISSING_SECRET in answer["warnings"]


async def test_the_mutating_hook_defaults_without_parsing(make_client: MakeClient) -> None:
    client = await make_client()
    with counting_parses() as parses:
        answer = response(await (await client.post(MUTATE, json=review(runtime()))).json())
    assert answer["allowed"] is True
    assert (parses.objects, parses.spec_models) == ([], 0)
