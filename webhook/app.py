"""The webhook's aiohttp applications: admission hooks (HTTPS) and probes (plain HTTP).

Each hook decodes an AdmissionReview, asks `common` for the decision and
encodes the answer; logging, metrics and error shaping wrap every hook the
same way. No hook has side effects, so `dryRun` requests are answered like
any other.
"""

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Middleware

from trussium_operator.common import admission
from trussium_operator.common.admission import AdmissionDecodeError, AdmissionRequest
from trussium_operator.common.constants import (
    GROUP,
    KIND,
    MUTATE_RUNTIME_PATH,
    VALIDATE_DEPLOYMENT_PATH,
    VALIDATE_RUNTIME_PATH,
    VERSION,
)
from trussium_operator.common.decode_cost import (
    decoded_bytes,
    least_decoded_bytes,
    values_at_most,
)
from trussium_operator.common.defaulting import spec_patch
from trussium_operator.common.guard import review_managed_deployment_update
from trussium_operator.common.json_limits import cut
from trussium_operator.common.k8s_validation import FieldError
from trussium_operator.common.parsing import over_bounds
from trussium_operator.common.secret_access import may_not_read, secrets_to_check, unchecked_message
from trussium_operator.common.validation import (
    ValidationResult,
    ratchet,
    validate_runtime,
    with_missing_secrets,
)
from trussium_operator.serving.health import probes_app
from trussium_operator.serving.limits import (
    DEFAULT_BODY_TIMEOUT_SECONDS,
    DEFAULT_BUDGET_WAIT_SECONDS,
    DEFAULT_MAX_REQUEST_BYTES,
    DEFAULT_MEMORY_BUDGET_BYTES,
    SMALL_REQUEST_BYTES,
    SMALL_REVIEW_DECODED_BYTES,
)
from trussium_operator.serving.listener import READ_BUFFER
from trussium_operator.webhook.budget import MemoryBudget, OverBudgetError, Reservation
from trussium_operator.webhook.metrics import WebhookMetrics
from trussium_operator.webhook.secret_access import SecretAccess

# Well inside the API server's 5 s budget: a slow lookup only costs a warning.
SECRET_LOOKUP_TIMEOUT_SECONDS = 1.0
# Each access review of a referenced Secret (a request's run at once): one the API
# server does not answer in time refuses the request, still within the hooks' 5 s
# (with the missing-Secret lookup's 1 s before it).
SECRET_ACCESS_TIMEOUT_SECONDS = 2.0
INTERNAL_ERROR = "internal error in the trussium webhook; see its logs"
# Bytes read at a time: the listener's buffer, since aiohttp reads ahead
# twice what the handler asks for, outside any reservation.
READ_CHUNK_BYTES = READ_BUFFER

SecretNames = Callable[[str], Awaitable[frozenset[str]]]
Answer = dict[str, Any]
Decide = Callable[[AdmissionRequest], Awaitable[Answer]]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AdmissionSettings:
    operator_username: str
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES
    body_timeout: float = DEFAULT_BODY_TIMEOUT_SECONDS
    # Names of the Secrets in a namespace (metadata only); None: no missing-Secret warning.
    secret_names: SecretNames | None = None
    secret_lookup_timeout: float = SECRET_LOOKUP_TIMEOUT_SECONDS
    # Whether a user may get a Secret (SubjectAccessReview); None: references are not
    # authorized (--no-authorize-secret-references).
    secret_access: SecretAccess | None = None
    secret_access_timeout: float = SECRET_ACCESS_TIMEOUT_SECONDS
    # Shared by every request this app serves: what its body will cost decoded,
    # estimated at least (beyond its first SMALL_REQUEST_BYTES) while it is
    # read, then from its contents (beyond SMALL_REVIEW_DECODED_BYTES).
    budget: MemoryBudget = field(
        default_factory=lambda: MemoryBudget(
            DEFAULT_MEMORY_BUDGET_BYTES, DEFAULT_BUDGET_WAIT_SECONDS
        )
    )


RuntimeHook = Callable[["Hooks", AdmissionRequest, dict[str, Any]], Awaitable[Answer]]


def _about_a_runtime(hook: RuntimeHook) -> Callable[["Hooks", AdmissionRequest], Awaitable[Answer]]:
    """What both runtime hooks open with: a review about anything but a TrussiumRuntime
    is a 400, one without an object (a DELETE) is allowed, and the hook gets the object."""

    @functools.wraps(hook)
    async def opened(hooks: "Hooks", request: AdmissionRequest) -> Answer:
        problem = _runtime_problem(request)
        if problem is not None:
            return problem
        if request.object is None:
            return admission.allowed(request.uid)
        return await hook(hooks, request, request.object)

    return opened


class Hooks:
    """The three admission decisions, each from a decoded request to an answer."""

    def __init__(self, settings: AdmissionSettings) -> None:
        self.settings = settings

    @_about_a_runtime
    async def mutate_runtime(self, request: AdmissionRequest, obj: dict[str, Any]) -> Answer:
        # The API server applied the installed CRD's defaults on decode; the patch adds
        # what an older installed CRD lacks (Helm never upgrades a chart's CRDs). A runtime
        # over the bounds is left alone: the schema (which the API server applies after
        # this hook) or the validating hook judges it, and defaulting all of it would
        # cost what the bounds are there to prevent (ADR 0027). Only the spec has
        # defaults, so nothing else is copied or walked (ADR 0037).
        if over_bounds(obj):
            return admission.allowed(request.uid)
        return admission.allowed(request.uid, patch=spec_patch(obj))

    @_about_a_runtime
    async def validate_runtime(self, request: AdmissionRequest, obj: dict[str, Any]) -> Answer:
        result = validate_runtime(obj, sound=True)  # decode_review checked the whole review
        existing = await self._existing_secrets(request.namespace, result)
        if existing is not None:
            result = with_missing_secrets(result, existing)
        if request.operation == "UPDATE":
            result = ratchet(result, request.old_object)
        unreadable, unchecked = await self._secret_access(request, result)
        errors = result.errors + unreadable
        if errors:
            return admission.invalid(
                request.uid,
                kind=request.kind,
                name=request.object_name,
                causes=errors,
                warnings=result.warnings,
            )
        if unchecked:
            return admission.denied(
                request.uid,
                unchecked_message(unchecked, request.username, request.namespace),
                code=503,
                reason="ServiceUnavailable",
                warnings=result.warnings,
            )
        return admission.allowed(request.uid, warnings=result.warnings)

    async def validate_managed_deployment(self, request: AdmissionRequest) -> Answer:
        if request.operation != "UPDATE":
            return admission.allowed(request.uid)
        if (request.kind.group, request.kind.kind) != ("apps", "Deployment"):
            return admission.bad_request(
                request.uid, f"this hook reviews apps/v1 Deployments, not {request.kind}"
            )
        if request.object is None or request.old_object is None:
            return admission.bad_request(request.uid, "an UPDATE review needs object and oldObject")
        verdict = review_managed_deployment_update(
            request.old_object,
            request.object,
            request.username,
            self.settings.operator_username,
        )
        if verdict.allowed:
            return admission.allowed(request.uid)
        return admission.denied(request.uid, verdict.message)

    async def _secret_access(
        self, request: AdmissionRequest, result: ValidationResult
    ) -> tuple[tuple[FieldError, ...], list[str]]:
        """The references to Secrets the requester may not get, and the Secrets whose
        access review failed or timed out (ADR 0034); all reviews run at once, each bounded
        by the timeout."""
        access = self.settings.secret_access
        spec = result.parsed.model if result.parsed else None
        if access is None or spec is None:
            return (), []
        checks = secrets_to_check(
            spec,
            request.old_object if request.operation == "UPDATE" else None,
            requester=request.username,
            operator=self.settings.operator_username,
        )

        async def may_get(name: str) -> bool | None:
            try:
                async with asyncio.timeout(self.settings.secret_access_timeout):
                    return await access(request.user, request.namespace, name)
            except Exception as error:  # refused below: nothing unchecked is admitted
                log.warning(
                    "cannot review access to a referenced Secret; refusing the request",
                    extra={
                        "fields": {
                            "namespace": request.namespace,
                            "secret": name,
                            "error": _failure(error),
                        }
                    },
                )
                return None

        answers = await asyncio.gather(*map(may_get, checks))
        unreadable = tuple(
            may_not_read(path, request.username, request.namespace, name)
            for (name, path), allowed in zip(checks.items(), answers, strict=True)
            if allowed is False
        )
        unchecked = [name for name, allowed in zip(checks, answers, strict=True) if allowed is None]
        return unreadable, unchecked

    async def _existing_secrets(
        self, namespace: str, result: ValidationResult
    ) -> frozenset[str] | None:
        """Secret names for the "does not exist yet" warning; None when unknown.

        Only asked when the validated spec references a Secret, bounded by a
        short timeout, and never allowed to fail the admission.
        """
        lister = self.settings.secret_names
        if lister is None or not namespace or not result.secret_paths:
            return None
        try:
            async with asyncio.timeout(self.settings.secret_lookup_timeout):
                return await lister(namespace)
        except Exception as error:  # a lookup failure must not fail the admission
            log.warning(
                "cannot list Secret names; skipping the missing-Secret warning",
                extra={"fields": {"namespace": namespace, "error": type(error).__name__}},
            )
            return None


def _failure(error: Exception) -> str:
    """The kind of a failed call for the log, with the API server's status when it gave
    one; never the message, which could quote the request."""
    status = getattr(error, "status", None)
    return f"{type(error).__name__} {status}" if isinstance(status, int) else type(error).__name__


def _runtime_problem(request: AdmissionRequest) -> Answer | None:
    """A 400 answer when the review is not about a TrussiumRuntime this webhook knows."""
    if (request.kind.group, request.kind.version, request.kind.kind) != (GROUP, VERSION, KIND):
        return admission.bad_request(
            request.uid, f"this hook reviews {GROUP}/{VERSION} {KIND}, not {request.kind}"
        )
    if request.operation in ("CREATE", "UPDATE") and request.object is None:
        return admission.bad_request(request.uid, f"a {request.operation} review needs an object")
    return None


def create_admission_app(settings: AdmissionSettings, metrics: WebhookMetrics) -> web.Application:
    """The HTTPS application: one POST route per hook."""
    hooks = Hooks(settings)
    app = web.Application(
        client_max_size=settings.max_request_bytes,
        middlewares=[metrics.middleware(), _json_errors(settings)],
    )
    for path, decide in (
        (MUTATE_RUNTIME_PATH, hooks.mutate_runtime),
        (VALIDATE_RUNTIME_PATH, hooks.validate_runtime),
        (VALIDATE_DEPLOYMENT_PATH, hooks.validate_managed_deployment),
    ):
        app.router.add_post(path, _handler(path.lstrip("/"), decide, settings, metrics))
    return app


def _handler(
    hook: str, decide: Decide, settings: AdmissionSettings, metrics: WebhookMetrics
) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    async def handle(http_request: web.Request) -> web.StreamResponse:
        with settings.budget.hold() as reservation:
            return await review(http_request, reservation)

    async def review(http_request: web.Request, reservation: Reservation) -> web.StreamResponse:
        started = time.perf_counter()
        try:
            async with asyncio.timeout(settings.body_timeout):
                body = await _read_body(http_request, settings.max_request_bytes, reservation)
            # Reserved before a value is built, so the sum of what all decoded
            # reviews hold stays within the budget (ADR 0037).
            cost = decoded_bytes(body)
            if cost <= settings.budget.total:
                await reservation.grow_to(cost - SMALL_REVIEW_DECODED_BYTES)
        except OverBudgetError:
            refused = _dropped(
                metrics,
                "memory_budget",
                429,
                f"the webhook's memory budget for request bodies ({settings.budget.total} "
                "bytes) is held by other requests; retry shortly",
            )
            refused.headers["Retry-After"] = "1"
            return refused
        except TimeoutError:
            return _dropped(
                metrics,
                "body_timeout",
                408,
                f"request body not received within {settings.body_timeout:g} seconds",
            )
        except web.RequestPayloadError:  # e.g. a gzip header on a body that is not gzip
            return _dropped(
                metrics,
                "unreadable_body",
                400,
                "request body cannot be read: invalid Content-Encoding or chunked framing",
            )
        except ConnectionError:
            return _dropped(metrics, "client_gone", 400, "connection closed mid-request")
        if cost > settings.budget.total:
            metrics.reviewed(hook, "error").inc()
            log.debug("admission request refused", extra={"fields": {"hook": hook, "cost": cost}})
            return _error_response(
                413,
                f"decoding the request body would take about {cost} bytes, more than the "
                f"webhook's memory budget of {settings.budget.total} bytes: it holds up to "
                f"{values_at_most(body)} JSON values ({len(body)} bytes)",
            )
        try:
            request = admission.decode_review(body)
        except AdmissionDecodeError as error:
            metrics.reviewed(hook, "error").inc()
            log.debug(
                "admission request refused", extra={"fields": {"hook": hook, "error": str(error)}}
            )
            if error.uid is None:
                return _error_response(400, str(error))
            return web.json_response(admission.bad_request(error.uid, str(error)))
        try:
            answer = await decide(request)
        except Exception:
            # An HTTP error (not a denial) lets the API server apply the hook's
            # failurePolicy: Fail for runtimes, Ignore for the guard.
            metrics.reviewed(hook, "error").inc()
            log.exception("admission decision failed", extra={"fields": _fields(hook, request)})
            return _error_response(500, INTERNAL_ERROR)
        response = admission.response_of(answer)
        status = response.get("status") or {}
        verdict = "allowed" if response.get("allowed") else "denied"
        if status.get("code") == 400:
            verdict = "error"
        duration = time.perf_counter() - started
        metrics.reviewed(hook, verdict).inc()
        if log.isEnabledFor(logging.INFO):  # its fields cost more than the check
            log.info(
                "admission reviewed",
                extra={
                    "fields": _fields(hook, request)
                    | {
                        "verdict": verdict,
                        "code": status.get("code"),
                        "patched": "patch" in response,
                        "warnings": len(response.get("warnings", ())),
                        "duration_ms": round(duration * 1000, 3),
                    }
                },
            )
        return web.json_response(answer)

    return handle


async def _read_body(request: web.Request, limit: int, reservation: Reservation) -> bytes:
    """The body, inflated, each part reserved from the budget before it is read, at
    the least it will cost decoded.

    A request's first SMALL_REQUEST_BYTES need no reservation, so ordinary
    reviews never wait for the budget; a declared plain length is what is
    reserved, else one read's worth ahead.
    """
    declared = request.content_length
    if declared is not None and declared > limit:
        raise web.HTTPRequestEntityTooLarge(max_size=limit, actual_size=declared)
    exact = declared is not None and "Content-Encoding" not in request.headers
    # Pieces, joined once at the end: growing one buffer would leave the
    # allocator holding freed blocks of every size along the way.
    pieces: list[bytes] = []
    size = 0
    try:
        while True:
            ahead = size + READ_CHUNK_BYTES
            if exact:
                ahead = min(ahead, declared or 0)
            await reservation.grow_to(least_decoded_bytes(ahead - SMALL_REQUEST_BYTES))
            piece = await request.content.read(READ_CHUNK_BYTES)
            if not piece:
                return b"".join(pieces)
            pieces.append(piece)
            size += len(piece)
            if size > limit:
                raise web.HTTPRequestEntityTooLarge(max_size=limit, actual_size=size)
    except BaseException:
        # The error's traceback keeps this frame alive, and aiohttp keeps the
        # error of a lost connection on the request: without this, the pieces
        # would outlive the reservation returned for them.
        pieces.clear()
        raise


def _fields(hook: str, request: AdmissionRequest) -> dict[str, Any]:
    """Who and what, never the object's contents; each cut to a readable length."""
    return {
        "hook": hook,
        "uid": cut(request.uid),
        "kind": cut(request.kind),
        "operation": cut(request.operation),
        "object": cut(request.display_name),
        "user": cut(request.username),
        "dry_run": request.dry_run,
    }


def _dropped(metrics: WebhookMetrics, reason: str, status: int, message: str) -> web.Response:
    """A request whose body never arrived whole: counted, logged at debug, connection closed."""
    metrics.connections.dropped.labels(reason).inc()
    log.debug("request dropped", extra={"fields": {"reason": reason}})
    response = _error_response(status, message)
    response.force_close()
    return response


def _json_errors(settings: AdmissionSettings) -> Middleware:
    """Every HTTP-level failure answered as a short JSON error, never a traceback."""

    @web.middleware
    async def middleware(
        request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        try:
            return await handler(request)
        except web.HTTPRequestEntityTooLarge:
            return _error_response(
                413,
                f"request body exceeds the webhook's limit of {settings.max_request_bytes} bytes",
            )
        except web.HTTPException as error:
            if error.status < 400:
                raise
            return _error_response(error.status, error.reason)
        except Exception:
            log.exception("unexpected error serving %s", request.path)
            return _error_response(500, INTERNAL_ERROR)

    return middleware


def _error_response(status: int, message: str) -> web.Response:
    return web.json_response({"code": status, "error": message}, status=status)


def create_health_app(ready: Callable[[], bool]) -> web.Application:
    """The plain-HTTP application: liveness and readiness (TLS material loaded)."""
    return probes_app(ready, "serving certificate not loaded yet")
