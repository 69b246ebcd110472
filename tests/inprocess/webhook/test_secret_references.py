"""The validating hook's rule on Secret references (ADR 0034), against an in-process access
review: what is asked, and the answers when the API server says no, fails or stalls.
tests/apiserver/test_secret_references.py proves the rule on a real API server."""

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any

import pytest
from kubernetes_asyncio.client.exceptions import ApiException

from trussium_operator.common.admission import UserInfo

from .conftest import Client, MakeClient
from .reviews import OPERATOR, causes, response, review, runtime

PATH = "/validate-trussiumruntime"
KEY = {"name": "openai-key", "key": "api-key"}
WITH_KEY = {"provider": {"type": "openai", "model": "m", "credentialsSecretRef": KEY}}
ALICE = {
    "username": "alice",
    "uid": "a-1",
    "groups": ["team-a", "system:authenticated"],
    "extra": {"scopes": ["runtimes"]},
}
CREDENTIALS = "spec.provider.credentialsSecretRef.name"


@dataclass
class Reviews:
    """The access reviews asked, answered from `readable` (or by `answer`)."""

    readable: set[str] = field(default_factory=set)
    asked: list[tuple[UserInfo, str, str]] = field(default_factory=list)
    in_flight: int = 0
    most_in_flight: int = 0

    async def answer(self, user: UserInfo, namespace: str) -> None:
        await asyncio.sleep(0.01)

    async def __call__(self, user: UserInfo, namespace: str, name: str) -> bool:
        self.asked.append((user, namespace, name))
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await self.answer(user, namespace)
        finally:
            self.in_flight -= 1
        return name in self.readable

    @property
    def names(self) -> list[str]:
        return sorted(name for _, _, name in self.asked)


def by(user: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
    body["request"]["userInfo"] = user
    return body


async def post(client: Client, body: dict[str, Any]) -> dict[str, Any]:
    return response(await (await client.post(PATH, json=body)).json())


@pytest.fixture
def reviews() -> Reviews:
    return Reviews()


@pytest.fixture
async def checking(make_client: MakeClient, reviews: Reviews) -> Client:
    return await make_client(secret_access=reviews)


async def test_a_secret_the_user_may_not_get_is_refused_at_its_reference(
    checking: Client, reviews: Reviews
) -> None:
    result = await post(checking, by(ALICE, review(runtime(**WITH_KEY))))
    assert result["allowed"] is False
    assert causes(result) == {
        CREDENTIALS: 'user "alice" may not get Secret "team-a/openai-key"; '
        "referencing a Secret needs the right to read it"
    }
    assert result["status"]["details"]["causes"][0]["type"] == "FieldValueForbidden"
    user = UserInfo(
        username="alice",
        uid="a-1",
        groups=("team-a", "system:authenticated"),
        extra=(("scopes", ("runtimes",)),),
    )
    assert reviews.asked == [(user, "team-a", "openai-key")], "asked for the requester as is"


async def test_a_secret_the_user_may_get_is_admitted(checking: Client, reviews: Reviews) -> None:
    reviews.readable = {"openai-key"}
    assert (await post(checking, by(ALICE, review(runtime(**WITH_KEY)))))["allowed"] is True


async def test_each_secret_is_asked_once_and_all_at_once(
    checking: Client, reviews: Reviews
) -> None:
    pulls = [{"name": f"pull-{i:02}"} for i in range(20)]
    pulls[3] = {"name": "openai-key"}
    reviews.readable = {"pull-00"}
    result = await post(checking, review(runtime(**WITH_KEY, imagePullSecrets=pulls)))
    assert reviews.names == sorted({p["name"] for p in pulls} | {"openai-key"})
    assert len(reviews.asked) == 20
    assert reviews.most_in_flight == 20
    found = causes(result)
    assert set(found) == {CREDENTIALS} | {
        f"spec.imagePullSecrets[{i}].name" for i in range(1, 20) if i != 3
    }


async def test_a_request_asks_at_most_one_review_per_secret_it_may_reference(
    checking: Client, reviews: Reviews
) -> None:
    """Pull secrets beyond their bound (20) are refused, and never asked about."""
    pulls = [{"name": f"pull-{i:03}"} for i in range(500)]
    result = await post(checking, review(runtime(**WITH_KEY, imagePullSecrets=pulls)))
    assert "spec.imagePullSecrets" in causes(result)
    assert len(reviews.asked) == 21


async def test_the_operator_and_unchanged_references_are_not_asked_about(
    checking: Client, reviews: Reviews
) -> None:
    operator = by({"username": OPERATOR}, review(runtime(**WITH_KEY)))
    assert (await post(checking, operator))["allowed"] is True
    old = runtime(**WITH_KEY)
    new = runtime(**WITH_KEY, image={"repository": "ghcr.io/trussiumhq/trussium", "tag": "1.5.0"})
    edit = review(new, old=old, operation="UPDATE")
    assert (await post(checking, edit))["allowed"] is True
    assert reviews.asked == []


async def test_a_new_base_url_for_the_key_is_checked(checking: Client, reviews: Reviews) -> None:
    old = runtime(**WITH_KEY)
    new = runtime(provider=WITH_KEY["provider"] | {"baseURL": "https://collector.example.net/v1"})
    result = await post(checking, review(new, old=old, operation="UPDATE"))
    assert set(causes(result)) == {CREDENTIALS}
    assert reviews.names == ["openai-key"]


async def test_other_errors_and_refused_references_are_reported_together(
    checking: Client,
) -> None:
    reserved = {"labels": {"app.kubernetes.io/name": "x"}}
    result = await post(checking, review(runtime(**WITH_KEY, podMetadata=reserved)))
    assert set(causes(result)) == {"spec.podMetadata.labels[app.kubernetes.io/name]", CREDENTIALS}


async def test_a_schema_violation_asks_nothing(checking: Client, reviews: Reviews) -> None:
    result = await post(checking, review(runtime(**WITH_KEY, replicas="many")))
    assert set(causes(result)) == {"spec.replicas"}
    assert reviews.asked == []


class Failing(Reviews):
    def __init__(self, error: BaseException) -> None:
        super().__init__()
        self.error = error

    async def answer(self, user: UserInfo, namespace: str) -> None:
        raise self.error


@pytest.mark.parametrize(
    "error",
    [ApiException(status=500, reason="Internal Server Error"), ConnectionResetError()],
    ids=["server-error", "connection-reset"],
)
async def test_a_failed_review_refuses_the_request_saying_why(
    make_client: MakeClient, error: Exception, caplog: pytest.LogCaptureFixture
) -> None:
    client = await make_client(secret_access=Failing(error))
    with caplog.at_level(logging.WARNING):
        result = await post(client, by(ALICE, review(runtime(**WITH_KEY))))
    assert result["allowed"] is False
    status = result["status"]
    assert (status["code"], status["reason"]) == (503, "ServiceUnavailable")
    assert status["message"].startswith(
        'cannot check whether user "alice" may get Secret "team-a/openai-key": '
        "the access review failed or timed out"
    )
    assert status["message"].endswith("try again")
    logged = [r for r in caplog.records if "access to a referenced Secret" in r.getMessage()]
    assert len(logged) == 1
    assert logged[0].__dict__["fields"]["secret"] == "openai-key"


async def test_a_refused_reference_wins_over_an_unanswered_one(make_client: MakeClient) -> None:
    class Partly(Reviews):
        async def answer(self, user: UserInfo, namespace: str) -> None:
            if len(self.asked) > 1:
                raise TimeoutError

    client = await make_client(secret_access=Partly())
    body = review(runtime(**WITH_KEY, imagePullSecrets=[{"name": "pull"}]))
    result = await post(client, body)
    assert result["status"]["code"] == 422
    assert len(causes(result)) == 1


async def test_a_stalled_review_refuses_the_request_within_its_timeout(
    make_client: MakeClient,
) -> None:
    class Stalled(Reviews):
        async def answer(self, user: UserInfo, namespace: str) -> None:
            await asyncio.Event().wait()

    stalled = Stalled()
    client = await make_client(secret_access=stalled, secret_access_timeout=0.3)
    pulls = [{"name": f"pull-{i}"} for i in range(5)]
    started = time.monotonic()
    result = await post(client, review(runtime(**WITH_KEY, imagePullSecrets=pulls)))
    elapsed = time.monotonic() - started
    assert result["status"]["code"] == 503
    assert 'Secrets "team-a/openai-key", "team-a/pull-0",' in result["status"]["message"]
    assert 0.3 <= elapsed < 1.5, "the reviews wait at once, each up to the timeout"
    assert stalled.in_flight == 0, "no review left running"


async def test_switched_off_nothing_is_asked(client: Client) -> None:
    assert (await post(client, by(ALICE, review(runtime(**WITH_KEY)))))["allowed"] is True
