"""AdmissionReview (admission.k8s.io/v1) decoding and the shapes of its answers.

Every hook decodes a request here, asks the core for a decision, and encodes
the answer here, so all hooks answer alike: the request's uid echoed, denials
as Kubernetes Status objects that kubectl prints like native errors, patches
as base64 JSONPatch. Pure: bytes and dicts in, dicts out.
"""

import base64
import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from trussium_operator.common.json_limits import MAX_DEPTH, cut, json_problem

ADMISSION_API_VERSION = "admission.k8s.io/v1"
ADMISSION_KIND = "AdmissionReview"
# Causes (and warnings) listed in one answer; the rest are counted, so one object with
# thousands of bad keys gets an answer of a few kilobytes.
MAX_CAUSES = 20


class AdmissionDecodeError(ValueError):
    """The body is not an AdmissionReview this webhook can answer.

    `uid` is set when the body carried one, so the caller can still answer with
    a well-formed AdmissionReview; without it only a plain HTTP 400 is possible.
    """

    def __init__(self, message: str, uid: str | None = None) -> None:
        super().__init__(message)
        self.uid = uid


@dataclass(frozen=True)
class GroupVersionKind:
    group: str
    version: str
    kind: str

    def __str__(self) -> str:
        api_version = f"{self.group}/{self.version}" if self.group else self.version
        return f"{api_version} {self.kind}"


@dataclass(frozen=True)
class UserInfo:
    """Who sent the request, as the API server authenticated them: what an access
    review asks about on their behalf."""

    username: str = ""
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()


@dataclass(frozen=True)
class AdmissionRequest:
    """The fields of an AdmissionReview request the hooks decide on."""

    uid: str
    kind: GroupVersionKind
    operation: str
    namespace: str
    name: str
    user: UserInfo
    object: dict[str, Any] | None
    old_object: dict[str, Any] | None
    dry_run: bool

    @property
    def username(self) -> str:
        return self.user.username

    @property
    def object_name(self) -> str:
        """The object's name (the request's own is empty on a CREATE with generateName)."""
        return self.name or _metadata_str(self.object, "name")

    @property
    def display_name(self) -> str:
        """namespace/name for logs."""
        name = self.object_name or "<generated>"
        return f"{self.namespace}/{name}" if self.namespace else name


class Cause(Protocol):
    """One field violation (satisfied by common.validation.FieldError)."""

    @property
    def path(self) -> str: ...
    @property
    def message(self) -> str: ...
    @property
    def type(self) -> str: ...


def decode_review(body: bytes) -> AdmissionRequest:
    """Parse an AdmissionReview body, or raise AdmissionDecodeError saying what is wrong."""
    try:
        document = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise AdmissionDecodeError(f"request body is not JSON: {error}") from None
    except ValueError:  # an integer beyond Python's conversion limit (4300 digits)
        raise AdmissionDecodeError(
            f"request body has an integer of more than {sys.get_int_max_str_digits()} digits"
        ) from None
    except RecursionError:
        raise AdmissionDecodeError(
            f"request body is nested deeper than {MAX_DEPTH} levels"
        ) from None
    if not isinstance(document, dict):
        raise AdmissionDecodeError("request body must be a JSON object (an AdmissionReview)")
    request = document.get("request")
    uid = request.get("uid") if isinstance(request, dict) else None
    uid = uid if isinstance(uid, str) and uid and json_problem(uid) is None else None
    problem = json_problem(document)
    if problem is not None:
        raise AdmissionDecodeError(f"{problem.path}: {problem.message}", uid)
    api_version, kind = document.get("apiVersion"), document.get("kind")
    if kind != ADMISSION_KIND or api_version != ADMISSION_API_VERSION:
        raise AdmissionDecodeError(
            f"expected apiVersion {ADMISSION_API_VERSION} kind {ADMISSION_KIND}, "
            f"got apiVersion {api_version!r} kind {kind!r}",
            uid,
        )
    if not isinstance(request, dict):
        raise AdmissionDecodeError("AdmissionReview has no request object")
    if uid is None:
        raise AdmissionDecodeError("AdmissionReview request has no uid")
    return AdmissionRequest(
        uid=uid,
        kind=_decode_kind(request.get("kind"), uid),
        operation=_optional_str(request, "operation", uid),
        namespace=_optional_str(request, "namespace", uid),
        name=_optional_str(request, "name", uid),
        user=_decode_user(request.get("userInfo"), uid),
        object=_optional_object(request, "object", uid),
        old_object=_optional_object(request, "oldObject", uid),
        dry_run=request.get("dryRun") is True,
    )


def allowed(
    uid: str,
    *,
    patch: Sequence[Mapping[str, Any]] = (),
    warnings: Iterable[str] = (),
) -> dict[str, Any]:
    """An allowing answer, with a JSONPatch only when there is something to change."""
    response: dict[str, Any] = {"uid": uid, "allowed": True}
    if patch:
        encoded = json.dumps(list(patch), separators=(",", ":")).encode()
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(encoded).decode()
    return _review(response, warnings)


def denied(
    uid: str,
    message: str,
    *,
    code: int = 403,
    reason: str = "Forbidden",
    details: Mapping[str, Any] | None = None,
    warnings: Iterable[str] = (),
) -> dict[str, Any]:
    """A denying answer carrying a Kubernetes Status."""
    status: dict[str, Any] = {
        "status": "Failure",
        "code": code,
        "reason": reason,
        "message": message,
    }
    if details:
        status["details"] = dict(details)
    return _review({"uid": uid, "allowed": False, "status": status}, warnings)


def invalid(
    uid: str,
    *,
    kind: GroupVersionKind,
    name: str,
    causes: Sequence[Cause],
    warnings: Iterable[str] = (),
) -> dict[str, Any]:
    """A 422 Invalid denial with one cause per field, as the API server's own validation.

    kubectl prints such a Status as `The <Kind> "<name>" is invalid:` followed by
    one `* field: message` line per cause. At most MAX_CAUSES are listed, in
    the message and in the causes alike, and a last one says how many more.
    """
    listed = [
        {"type": cause.type, "field": cause.path, "message": cause.message}
        for cause in causes[:MAX_CAUSES]
    ]
    summary = ", ".join(f"{cause.path}: {cause.message}" for cause in causes[:MAX_CAUSES])
    left_out = len(causes) - len(listed)
    if left_out:
        more = f"and {left_out} more errors not listed; fix these and try again to see them"
        listed.append({"type": "FieldValueInvalid", "field": "", "message": more})
        summary += f", {more}"
    return denied(
        uid,
        f'{kind.kind}.{kind.group} "{name}" is invalid: [{summary}]',
        code=422,
        reason="Invalid",
        details={"name": name, "group": kind.group, "kind": kind.kind, "causes": listed},
        warnings=warnings,
    )


def bad_request(uid: str, message: str) -> dict[str, Any]:
    """A 400 denial for a review that is well formed but cannot be decided."""
    return denied(uid, message, code=400, reason="BadRequest")


def response_of(review: Mapping[str, Any]) -> Mapping[str, Any]:
    """The response part of an answer (for logging and metrics)."""
    response = review.get("response")
    return response if isinstance(response, Mapping) else {}


def _review(response: dict[str, Any], warnings: Iterable[str]) -> dict[str, Any]:
    warning_list = list(dict.fromkeys(warnings))
    if len(warning_list) > MAX_CAUSES:
        left_out = len(warning_list) - MAX_CAUSES
        warning_list[MAX_CAUSES:] = [f"and {left_out} more warnings not listed"]
    if warning_list:
        response["warnings"] = warning_list
    return {"apiVersion": ADMISSION_API_VERSION, "kind": ADMISSION_KIND, "response": response}


def _decode_kind(value: object, uid: str) -> GroupVersionKind:
    if not isinstance(value, dict):
        raise AdmissionDecodeError("AdmissionReview request has no kind", uid)
    parts = [value.get(key, "") for key in ("group", "version", "kind")]
    if not all(isinstance(part, str) for part in parts) or not parts[2]:
        raise AdmissionDecodeError("AdmissionReview request.kind must name a kind", uid)
    group, version, kind = parts
    return GroupVersionKind(group, version, kind)


def _decode_user(value: object, uid: str) -> UserInfo:
    if value is None:
        return UserInfo()
    if not isinstance(value, dict):
        raise AdmissionDecodeError("AdmissionReview request.userInfo must be an object", uid)
    username, user_uid = value.get("username", ""), value.get("uid", "")
    for key, text in (("username", username), ("uid", user_uid)):
        if not isinstance(text, str):
            raise AdmissionDecodeError(
                f"AdmissionReview request.userInfo.{key} must be a string", uid
            )
    extra = value.get("extra")
    extra = {} if extra is None else extra
    if not isinstance(extra, dict):
        raise AdmissionDecodeError("AdmissionReview request.userInfo.extra must be an object", uid)
    return UserInfo(
        username=username,
        uid=user_uid,
        groups=_strings(value.get("groups"), "userInfo.groups", uid),
        extra=tuple(
            (key, _strings(values, f"userInfo.extra[{key}]", uid))
            for key, values in sorted(extra.items())
        ),
    )


def _strings(value: object, field: str, uid: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise AdmissionDecodeError(
            f"AdmissionReview request.{cut(field)} must be a list of strings", uid
        )
    return tuple(value)


def _optional_str(request: Mapping[str, Any], key: str, uid: str) -> str:
    value = request.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise AdmissionDecodeError(f"AdmissionReview request.{key} must be a string", uid)
    return value


def _optional_object(request: Mapping[str, Any], key: str, uid: str) -> dict[str, Any] | None:
    value = request.get(key)
    if value is None:
        return None
    if not isinstance(value, dict):
        raise AdmissionDecodeError(f"AdmissionReview request.{key} must be an object", uid)
    return value


def _metadata_str(obj: Mapping[str, Any] | None, key: str) -> str:
    metadata = obj.get("metadata") if obj else None
    value = metadata.get(key) if isinstance(metadata, Mapping) else None
    return value if isinstance(value, str) else ""
