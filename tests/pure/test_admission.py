"""AdmissionReview decoding and the shape of every answer."""

import base64
import json
from dataclasses import dataclass
from typing import Any

import pytest

from trussium_operator.common import admission


@dataclass(frozen=True)
class Violation:
    path: str
    message: str
    type: str = "FieldValueInvalid"


def review(**request: Any) -> bytes:
    body = {
        "uid": "u-1",
        "kind": {"group": "runtime.trussium.io", "version": "v1alpha1", "kind": "TrussiumRuntime"},
        "operation": "CREATE",
        "namespace": "team-a",
        "name": "chat",
        "userInfo": {"username": "alice"},
        "object": {"metadata": {"name": "chat"}},
    } | request
    return json.dumps(
        {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": body}
    ).encode()


def test_decodes_a_request() -> None:
    request = admission.decode_review(review(dryRun=True, oldObject={"a": 1}))
    assert request.uid == "u-1"
    assert str(request.kind) == "runtime.trussium.io/v1alpha1 TrussiumRuntime"
    assert (request.operation, request.username, request.dry_run) == ("CREATE", "alice", True)
    assert request.display_name == "team-a/chat"
    assert request.old_object == {"a": 1}


def test_decodes_the_whole_user_for_access_reviews_on_their_behalf() -> None:
    user = {
        "username": "alice",
        "uid": "a-1",
        "groups": ["team-a", "system:authenticated"],
        "extra": {"scopes": ["b", "a"], "authentication.kubernetes.io/pod-name": ["p"]},
    }
    request = admission.decode_review(review(userInfo=user))
    assert request.user == admission.UserInfo(
        username="alice",
        uid="a-1",
        groups=("team-a", "system:authenticated"),
        extra=(("authentication.kubernetes.io/pod-name", ("p",)), ("scopes", ("b", "a"))),
    )
    assert admission.decode_review(review(userInfo=None)).user == admission.UserInfo()


def test_generated_name_is_displayed_as_such() -> None:
    request = admission.decode_review(review(name=None, object={"metadata": {}}))
    assert request.display_name == "team-a/<generated>"


@pytest.mark.parametrize(
    ("body", "message", "uid"),
    [
        (b"not json", "request body is not JSON", None),
        (b"\xff\xfe", "request body is not JSON", None),
        (b"[]", "must be a JSON object", None),
        (b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}', "no request", None),
        (
            b'{"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview",'
            b' "request": {"uid": "u-9"}}',
            "expected apiVersion admission.k8s.io/v1 kind AdmissionReview",
            "u-9",
        ),
        (
            b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {}}',
            "no uid",
            None,
        ),
    ],
)
def test_unusable_bodies_are_explained(body: bytes, message: str, uid: str | None) -> None:
    with pytest.raises(admission.AdmissionDecodeError, match=message) as caught:
        admission.decode_review(body)
    assert caught.value.uid == uid


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("kind", "Pod", "has no kind"),
        ("kind", {"version": "v1"}, "must name a kind"),
        ("object", [1], "request.object must be an object"),
        ("userInfo", {"username": 3}, "username must be a string"),
        ("userInfo", "alice", "userInfo must be an object"),
        ("userInfo", {"uid": 3}, "userInfo.uid must be a string"),
        ("userInfo", {"groups": "team-a"}, "userInfo.groups must be a list of strings"),
        ("userInfo", {"extra": {"k": [1]}}, r"userInfo.extra\[k\] must be a list of strings"),
        ("userInfo", {"extra": []}, "userInfo.extra must be an object"),
        ("namespace", 7, "request.namespace must be a string"),
    ],
)
def test_ill_typed_fields_keep_the_uid(field: str, value: Any, message: str) -> None:
    with pytest.raises(admission.AdmissionDecodeError, match=message) as caught:
        admission.decode_review(review(**{field: value}))
    assert caught.value.uid == "u-1"


def test_allowed_without_patch_has_no_patch_type() -> None:
    answer = admission.allowed("u-1")
    assert answer == {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {"uid": "u-1", "allowed": True},
    }


def test_allowed_with_patch_is_base64_jsonpatch_and_warnings_are_deduplicated() -> None:
    patch = [{"op": "add", "path": "/spec/replicas", "value": 1}]
    response = admission.allowed("u-1", patch=patch, warnings=["a", "b", "a"])["response"]
    assert response["patchType"] == "JSONPatch"
    assert json.loads(base64.b64decode(response["patch"])) == patch
    assert response["warnings"] == ["a", "b"]


def test_invalid_is_a_422_status_with_one_cause_per_field() -> None:
    kind = admission.GroupVersionKind("runtime.trussium.io", "v1alpha1", "TrussiumRuntime")
    answer = admission.invalid(
        "u-1",
        kind=kind,
        name="chat",
        causes=[Violation("spec.replicas", "must be <= 1000"), Violation("spec.image", "bad")],
        warnings=["w"],
    )
    response = answer["response"]
    assert response["allowed"] is False
    assert response["warnings"] == ["w"]
    status = response["status"]
    assert (status["code"], status["reason"], status["status"]) == (422, "Invalid", "Failure")
    assert status["message"] == (
        'TrussiumRuntime.runtime.trussium.io "chat" is invalid: '
        "[spec.replicas: must be <= 1000, spec.image: bad]"
    )
    assert status["details"] == {
        "name": "chat",
        "group": "runtime.trussium.io",
        "kind": "TrussiumRuntime",
        "causes": [
            {"type": "FieldValueInvalid", "field": "spec.replicas", "message": "must be <= 1000"},
            {"type": "FieldValueInvalid", "field": "spec.image", "message": "bad"},
        ],
    }


def test_bad_request_is_a_400_denial() -> None:
    status = admission.bad_request("u-1", "wrong kind")["response"]["status"]
    assert (status["code"], status["reason"], status["message"]) == (
        400,
        "BadRequest",
        "wrong kind",
    )
