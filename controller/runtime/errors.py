"""What a failed reconcile means, decided in one place (ADR 0015).

- A race: someone wrote first (409, or a guarded JSON patch whose `test` no
  longer holds). Nothing failed; the key is retried with fresh data, quietly.
- A failure the API explains: the runtime reports it (`ReconciliationFailed`
  status and a Warning Event) and is retried with backoff; the log names the
  error without a traceback.
- No answer at all (the connection failed, broke or timed out): retried with
  backoff and logged, not reported. The report would travel the same broken
  path, and an API server restart is not every runtime's failure (ADR 0012).
- A throttled request (429, 503, or an answer with `Retry-After`): the same,
  and retried no sooner than the server asked (ADR 0038). Overload is no
  runtime's failure, and a report per retry would add to the load.
- Anything else is a bug: retried with backoff, logged with a traceback,
  the status left alone (it would only say "internal error").
"""

from enum import Enum

from trussium_operator.controller.machinery.kube import (
    ApiError,
    KubeError,
    TransportError,
    describe,
)

# kube-apiserver's 422 for a JSON patch it cannot apply (a `test` op that failed, a
# path already removed): this generic message and empty details, where an invalid
# object's 422 names the object and its fields (tests/apiserver/test_controller_errors.py).
PATCH_NOT_APPLICABLE = "the server rejected our request due to an error in our request"


class ReconcileError(Exception):
    """A failure the reconciler has already reported in status: retry with backoff."""


class ResourceConflictError(ReconcileError):
    """Managed names held by objects the runtime does not own (`common.ownership`):
    nothing is written until they are free."""

    def __init__(self, messages: tuple[str, ...]) -> None:
        super().__init__(" ".join(messages))
        self.messages = messages


class Failure(Enum):
    RACE = "race"
    REPORTED = "reported"
    TRANSIENT = "transient"
    BUG = "bug"

    @property
    def counted(self) -> bool:
        """An error in the reconcile metrics and the log; a race is neither."""
        return self is not Failure.RACE

    @property
    def traceback(self) -> bool:
        return self is Failure.BUG


def classify(error: BaseException) -> Failure:
    if isinstance(error, ApiError):
        if error.conflict or patch_not_applicable(error):
            return Failure.RACE
        return Failure.TRANSIENT if error.throttled else Failure.REPORTED
    if isinstance(error, TransportError | OSError | TimeoutError):
        return Failure.TRANSIENT
    if isinstance(error, KubeError | ReconcileError):
        return Failure.REPORTED
    return Failure.BUG


def retry_after(error: BaseException) -> float | None:
    """The seconds the API server asked the retry to wait, if it asked."""
    return error.retry_after if isinstance(error, ApiError) else None


def patch_not_applicable(error: ApiError) -> bool:
    """A JSON patch refused because the object no longer matches it, not as invalid."""
    return error.invalid and error.message == PATCH_NOT_APPLICABLE


def failure_message(error: BaseException) -> str:
    """What the status and the Warning Event say about a reported failure: an API
    error's status, reason and message (about our own objects, which hold no Secret
    value), or the type of a failure without an answer."""
    if isinstance(error, ApiError):
        return f"{error.status} {error.reason}: {error.message}"
    if isinstance(error, ReconcileError):
        return str(error)
    return describe(error)
