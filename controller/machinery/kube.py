"""The controller's only door to the API server: raw JSON requests and watch streams.

The generated kubernetes_asyncio models are bypassed on purpose: the
controller works on plain dicts (what `common/` consumes), needs content
types the generated methods do not offer (server-side apply, metadata-only
lists) and must never deserialize a Secret.
"""

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import urlencode, urlsplit

import aiohttp
import orjson
from aiohttp.http_exceptions import HttpProcessingError
from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.exceptions import ApiException

from trussium_operator.controller.machinery import metrics
from trussium_operator.controller.machinery.tokenbucket import TokenBucket

JSON = "application/json"
APPLY_PATCH = "application/apply-patch+yaml"
JSON_PATCH = "application/json-patch+json"


@dataclass(frozen=True)
class Resource:
    """One API resource: enough to build its URL paths."""

    api_version: str
    kind: str
    plural: str

    def path(self, namespace: str | None = None, name: str | None = None) -> str:
        base = "/api/v1" if self.api_version == "v1" else f"/apis/{self.api_version}"
        if namespace:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        return f"{base}/{name}" if name else base


SECRETS = Resource("v1", "Secret", "secrets")
EVENTS = Resource("events.k8s.io/v1", "Event", "events")
LEASES = Resource("coordination.k8s.io/v1", "Lease", "leases")


def micro_time(now: datetime) -> str:
    """A `MicroTime` field's format (Lease renewals, Event times)."""
    return now.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class KubeError(Exception):
    """Anything a request can fail with that is the API server's or the network's doing."""


class ApiError(KubeError):
    """A non-2xx answer: status code, Kubernetes reason and message (never a body dump),
    and the seconds its `Retry-After` header asks the client to wait, if any."""

    def __init__(
        self, status: int, reason: str, message: str, retry_after: float | None = None
    ) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message
        self.retry_after = retry_after

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def conflict(self) -> bool:
        return self.status == 409

    @property
    def invalid(self) -> bool:
        return self.status == 422

    @property
    def throttled(self) -> bool:
        """The API server asks to be asked later: 429 (API Priority and Fairness, the
        in-flight limits), 503, or any answer carrying `Retry-After` (a server timeout)."""
        return self.status in (429, 503) or self.retry_after is not None


class TransportError(KubeError):
    """No answer: the connection failed, broke or timed out, or the credentials could
    not be refreshed. A watch can resume from the last version it saw. The message
    is the underlying error's type only (a payload error can quote the payload)."""


class UnreadableError(KubeError):
    """An answer came but cannot be used: not JSON, not an object, or a watch line
    over the client's limit. Resuming would meet it again; a list starts afresh."""


# What aiohttp and the token refresh raise when the API server or the path to it
# misbehaves: ClientError covers ServerDisconnectedError and ClientPayloadError.
_NO_ANSWER = (aiohttp.ClientError, OSError, TimeoutError, ApiException, config.ConfigException)
# HttpProcessingError covers LineTooLong; ValueError undecodable JSON and text.
_UNREADABLE = (HttpProcessingError, ValueError)


@contextmanager
def _transport_errors() -> Iterator[None]:
    try:
        yield
    except _NO_ANSWER as error:
        raise TransportError(type(error).__name__) from error
    except _UNREADABLE as error:
        raise UnreadableError(type(error).__name__) from error


def describe(error: BaseException) -> str:
    """What a log line may say about an error: its type, and for an API error the
    status and reason, never the message (it can quote object contents)."""
    if isinstance(error, ApiError):
        return f"{error.status} {error.reason}"
    if isinstance(error, TransportError | UnreadableError):
        return f"{type(error).__name__}: {error}"
    return type(error).__name__


def retry_after_seconds(value: str | None) -> float | None:
    """A `Retry-After` header in its seconds form, the one kube-apiserver sends; None
    when absent or in any other form (an HTTP date is not worth a clock comparison).
    Unbounded here: whoever waits caps it."""
    if value is None or not (value := value.strip()).isascii() or not value.isdigit():
        return None
    return float(value)


async def _error(response: aiohttp.ClientResponse) -> ApiError:
    retry_after = retry_after_seconds(response.headers.get("Retry-After"))
    try:
        body = orjson.loads(await response.read())
    except ValueError:
        body = None
    if not isinstance(body, dict):
        # A throttled request's answer is plain text ("Too many requests, please try again later.").
        return ApiError(response.status, response.reason or "", "", retry_after)
    reason, message = str(body.get("reason", "")), str(body.get("message", ""))
    return ApiError(response.status, reason, message, retry_after)


class Kube:
    """JSON over the API client's authenticated aiohttp session.

    With a `limiter`, every request (a watch's too) first waits for a token, as
    client-go's QPS and burst make it; without one, only the API server's
    priority and fairness limits apply."""

    def __init__(self, api: client.ApiClient, limiter: TokenBucket | None = None) -> None:
        self.api = api
        self.limiter = limiter
        self._host = urlsplit(api.configuration.host).netloc

    async def _throttle(self, method: str) -> None:
        if self.limiter is None:
            return
        delay = self.limiter.reserve()
        metrics.REST_CLIENT_RATE_LIMITER_DURATION.labels(method, self._host).observe(delay)
        if delay:
            await asyncio.sleep(delay)

    async def _send(
        self,
        method: str,
        path: str,
        *,
        query: dict[str, Any] | None = None,
        body: Any = None,
        content_type: str = JSON,
        accept: str = JSON,
        read_timeout: aiohttp.ClientTimeout | None = None,
    ) -> aiohttp.ClientResponse:
        """Straight to the API client's session, with its credentials, proxy and TLS
        server name. The generated client's `call_api` would walk every body and query
        in Python to sanitize them, a twentieth of the controller's CPU (docs/benchmarks.md,
        "Where the controller's CPU goes"); these are plain JSON already."""
        await self._throttle(method)
        code = "<error>"
        try:
            api, rest = self.api, self.api.rest_client
            headers = {"Content-Type": content_type, "Accept": accept, **api.default_headers}
            token = (await api.configuration.auth_settings()).get("BearerToken")
            if token:
                headers[token["key"]] = token["value"]
            url = f"{api.configuration.host}{path}"
            if query:
                url += "?" + urlencode(sorted(query.items()))
            response = await rest.pool_manager.request(
                method,
                url,
                headers=headers,
                data=None if body is None else orjson.dumps(body),
                timeout=read_timeout or aiohttp.ClientTimeout(total=60),
                proxy=rest.proxy or None,
                proxy_headers=rest.proxy_headers or None,
                server_hostname=rest.server_hostname or None,
            )
            code = str(response.status)
            return response
        finally:
            metrics.REST_CLIENT_REQUESTS.labels(code, method, self._host).inc()

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: dict[str, Any] | None = None,
        body: Any = None,
        content_type: str = JSON,
        accept: str = JSON,
    ) -> dict[str, Any]:
        """One request; raises ApiError on any non-2xx answer."""
        with _transport_errors():
            response = await self._send(
                method, path, query=query, body=body, content_type=content_type, accept=accept
            )
            async with response:
                if not 200 <= response.status < 300:
                    raise await _error(response)
                result = orjson.loads(await response.read())
                if not isinstance(result, dict):
                    raise UnreadableError("answer is not a JSON object")
                return result

    async def watch(
        self,
        path: str,
        query: dict[str, Any],
        accept: str = JSON,
        opened: Callable[[], None] = lambda: None,
    ) -> AsyncIterator[dict[str, Any]]:
        """Yield watch events until the server closes the stream; `opened` is called
        once the server has accepted the watch.

        A line longer than the client's read buffer allows (4 MiB) fails the
        watch with UnreadableError rather than growing without bound."""
        seconds = int(query.get("timeoutSeconds", 300))
        with _transport_errors():
            response = await self._send(
                "GET",
                path,
                query=query | {"watch": "true"},
                accept=accept,
                read_timeout=aiohttp.ClientTimeout(sock_connect=30, sock_read=seconds + 30),
            )
            async with response:
                if response.status != 200:
                    raise await _error(response)
                opened()
                async for line in response.content:
                    if line.strip():
                        event = orjson.loads(line)
                        if not isinstance(event, dict):
                            raise UnreadableError("watch event is not an object")
                        yield event
