"""Which referenced Secrets a requester must be allowed to read (ADR 0034), and the answers."""

from typing import Any

import pytest

from trussium_operator.common.api import TrussiumRuntimeSpec
from trussium_operator.common.secret_access import (
    may_not_read,
    secrets_to_check,
    unchecked_message,
)

OPERATOR = "system:serviceaccount:trussium-system:trussium-operator"
KEY = {"name": "openai-key", "key": "api-key"}


def spec_data(**fields: Any) -> dict[str, Any]:
    provider = {"type": "openai", "model": "m"} | fields.pop("provider", {})
    return {"image": {"repository": "r", "tag": "1"}, "provider": provider} | fields


def spec(**fields: Any) -> TrussiumRuntimeSpec:
    return TrussiumRuntimeSpec.model_validate(spec_data(**fields))


def checks(new: dict[str, Any], old: object = None, requester: str = "alice") -> dict[str, str]:
    return secrets_to_check(spec(**new), old, requester=requester, operator=OPERATOR)


def stored(**fields: Any) -> dict[str, Any]:
    return {"metadata": {"name": "chat"}, "spec": spec_data(**fields)}


WITH_KEY: dict[str, Any] = {"provider": {"credentialsSecretRef": KEY}}


def test_a_create_checks_every_referenced_secret_once() -> None:
    new = {
        "provider": {"credentialsSecretRef": KEY},
        "imagePullSecrets": [{"name": "pull-b"}, {"name": "openai-key"}, {"name": "pull-a"}],
    }
    assert checks(new) == {
        "openai-key": "spec.provider.credentialsSecretRef.name",
        "pull-a": "spec.imagePullSecrets[2].name",
        "pull-b": "spec.imagePullSecrets[0].name",
    }


def test_a_runtime_without_references_needs_no_check() -> None:
    assert checks({}) == {}
    assert checks({}, stored(**WITH_KEY)) == {}, "dropping a reference needs no right"


def test_the_operators_own_account_is_not_checked() -> None:
    assert checks(WITH_KEY, requester=OPERATOR) == {}
    assert checks(WITH_KEY, stored(), requester=OPERATOR) == {}


@pytest.mark.parametrize(
    "old",
    [
        stored(**WITH_KEY, replicas=3, image={"repository": "other", "tag": "2"}),
        stored(provider={"credentialsSecretRef": KEY, "type": "ollama"}),
    ],
    ids=["image-and-replicas", "provider-type"],
)
def test_an_update_that_keeps_the_key_and_its_destination_is_not_checked(
    old: dict[str, Any],
) -> None:
    assert checks(WITH_KEY, old) == {}


@pytest.mark.parametrize(
    ("old_provider", "new_provider"),
    [
        ({}, {"credentialsSecretRef": KEY}),
        (
            {"credentialsSecretRef": {"name": "other", "key": "api-key"}},
            {"credentialsSecretRef": KEY},
        ),
        ({"credentialsSecretRef": KEY | {"key": "other"}}, {"credentialsSecretRef": KEY}),
        (
            {"credentialsSecretRef": KEY},
            {"credentialsSecretRef": KEY, "baseURL": "https://attacker.example"},
        ),
        (
            {"credentialsSecretRef": KEY, "baseURL": "https://api.openai.com/v1"},
            {"credentialsSecretRef": KEY, "baseURL": "https://attacker.example"},
        ),
        (
            {"credentialsSecretRef": KEY, "baseURL": "https://api.openai.com/v1"},
            {"credentialsSecretRef": KEY},
        ),
    ],
    ids=[
        "added",
        "other-secret",
        "other-key",
        "base-url-set",
        "base-url-changed",
        "base-url-unset",
    ],
)
def test_a_new_key_reference_or_destination_is_checked(
    old_provider: dict[str, Any], new_provider: dict[str, Any]
) -> None:
    assert checks({"provider": new_provider}, stored(provider=old_provider)) == {
        "openai-key": "spec.provider.credentialsSecretRef.name"
    }


def test_a_base_url_change_without_a_key_is_not_checked() -> None:
    old = stored(imagePullSecrets=[{"name": "pull"}])
    new = {
        "provider": {"baseURL": "https://elsewhere.example"},
        "imagePullSecrets": [{"name": "pull"}],
    }
    assert checks(new, old) == {}


def test_only_newly_referenced_pull_secrets_are_checked() -> None:
    old = stored(imagePullSecrets=[{"name": "a"}, {"name": "b"}])
    new = {"imagePullSecrets": [{"name": "b"}, {"name": "c"}, {"name": "a"}]}
    assert checks(new, old) == {"c": "spec.imagePullSecrets[1].name"}


def test_a_pull_secret_moved_to_the_provider_key_is_checked() -> None:
    old = stored(imagePullSecrets=[{"name": "openai-key"}])
    assert checks(WITH_KEY, old) == {"openai-key": "spec.provider.credentialsSecretRef.name"}


def test_a_key_also_added_as_pull_secret_is_checked_there() -> None:
    old = stored(**WITH_KEY)
    new = WITH_KEY | {"imagePullSecrets": [{"name": "openai-key"}]}
    assert checks(new, old) == {"openai-key": "spec.imagePullSecrets[0].name"}


@pytest.mark.parametrize(
    "old",
    [None, "not an object", {"spec": 3}, {"spec": {"provider": [], "imagePullSecrets": {}}}],
    ids=["none", "string", "spec-not-an-object", "ill-typed-parts"],
)
def test_what_cannot_be_read_in_the_stored_object_counts_as_changed(old: object) -> None:
    new = WITH_KEY | {"imagePullSecrets": [{"name": "pull"}]}
    assert set(checks(new, old)) == {"openai-key", "pull"}


def test_the_denial_names_the_user_the_secret_and_the_missing_right() -> None:
    error = may_not_read("spec.provider.credentialsSecretRef.name", "alice", "team-a", "openai-key")
    assert error.path == "spec.provider.credentialsSecretRef.name"
    assert error.type == "FieldValueForbidden"
    assert error.message == (
        'user "alice" may not get Secret "team-a/openai-key"; '
        "referencing a Secret needs the right to read it"
    )


def test_a_hostile_user_name_is_quoted_and_cut() -> None:
    message = may_not_read("p", 'eve"\n' + "x" * 500, "team-a", "s").message
    assert message.startswith('user "eve\\"\\nxxx')
    assert "\n" not in message
    assert len(message) < 250


def test_an_unchecked_reference_says_why_and_what_to_do() -> None:
    message = unchecked_message(["a", "b"], "alice", "team-a")
    assert message.startswith('cannot check whether user "alice" may get Secrets "team-a/a", ')
    assert "the access review failed or timed out" in message
    assert message.endswith("try again")
    assert 'Secret "team-a/a":' in unchecked_message(["a"], "alice", "team-a")
