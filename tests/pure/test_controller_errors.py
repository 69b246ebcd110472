"""What each error the client can raise makes of a reconcile (ADR 0015).

The classification is in controller/runtime/errors.py."""

import pytest

from trussium_operator.controller.machinery.kube import ApiError, TransportError, UnreadableError
from trussium_operator.controller.runtime.errors import (
    PATCH_NOT_APPLICABLE,
    Failure,
    ReconcileError,
    classify,
    failure_message,
    retry_after,
)

INVALID_OBJECT = 'Service "rt" is invalid: spec.ports[1].name: Duplicate value: "http"'


@pytest.mark.parametrize(
    ("error", "failure"),
    [
        (ApiError(409, "Conflict", "the object has been modified"), Failure.RACE),
        (ApiError(409, "AlreadyExists", 'events "rt.1" already exists'), Failure.RACE),
        (ApiError(422, "Invalid", PATCH_NOT_APPLICABLE), Failure.RACE),
        (ApiError(422, "Invalid", INVALID_OBJECT), Failure.REPORTED),
        (ApiError(404, "NotFound", 'deployments "rt" not found'), Failure.REPORTED),
        (ApiError(410, "Gone", "too old resource version"), Failure.REPORTED),
        (ApiError(429, "Too Many Requests", "", retry_after=1.0), Failure.TRANSIENT),
        (ApiError(429, "TooManyRequests", "slow down"), Failure.TRANSIENT),
        (ApiError(500, "InternalError", "etcd"), Failure.REPORTED),
        (ApiError(500, "ServerTimeout", "retry", retry_after=2.0), Failure.TRANSIENT),
        (ApiError(503, "ServiceUnavailable", ""), Failure.TRANSIENT),
        (ApiError(403, "Forbidden", "denied"), Failure.REPORTED),
        (TransportError("ServerDisconnectedError"), Failure.TRANSIENT),
        (UnreadableError("answer is not a JSON object"), Failure.REPORTED),
        (TimeoutError(), Failure.TRANSIENT),
        (ConnectionResetError(), Failure.TRANSIENT),
        (ReconcileError("cannot list Secrets: 503"), Failure.REPORTED),
        (KeyError("spec"), Failure.BUG),
        (ZeroDivisionError(), Failure.BUG),
    ],
)
def test_every_error_is_a_race_a_reported_or_transient_failure_or_a_bug(
    error: Exception, failure: Failure
) -> None:
    assert classify(error) is failure


def test_a_retry_waits_as_long_as_the_api_server_asked_if_it_asked() -> None:
    assert retry_after(ApiError(429, "Too Many Requests", "", retry_after=3.0)) == 3.0
    assert retry_after(ApiError(503, "ServiceUnavailable", "")) is None
    assert retry_after(TransportError("ServerDisconnectedError")) is None


def test_only_a_race_is_retried_without_counting_and_only_a_bug_logs_a_traceback() -> None:
    assert [(f.counted, f.traceback) for f in Failure] == [
        (False, False),
        (True, False),
        (True, False),
        (True, True),
    ]


def test_the_status_names_the_api_answer_or_the_type_of_a_missing_one() -> None:
    assert failure_message(ApiError(403, "Forbidden", "denied")) == "403 Forbidden: denied"
    assert failure_message(TransportError("ClientConnectorError")) == (
        "TransportError: ClientConnectorError"
    )
    assert failure_message(TimeoutError("read at 4 MiB of the payload")) == "TimeoutError"
    assert failure_message(ReconcileError("cannot list Secrets")) == "cannot list Secrets"
