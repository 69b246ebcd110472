"""Who may read /metrics: the user a bearer token belongs to, as the API server
says (TokenReview), allowed `get` on the non-resource URL (SubjectAccessReview).

The decisions of controller-runtime's `filters.WithAuthenticationAndAuthorization`,
which the Go operator serves its metrics behind (docs/adr/0026):
- no bearer token, or one the API server does not authenticate: 401;
- authenticated, but not allowed the request's verb (the HTTP method in lower
  case) on its path: 403;
- allowed: the handler answers.
A review the API server does not answer in time is a 503 and is not cached.

Answers are cached as controller-runtime caches them (authentication 1 min,
allowed 5 min, denied 30 s), keyed by the token's SHA-256 digest, never the
token. A revoked token or binding may therefore read metrics for up to those
times. Each kind of answer has its own LRU cache of at most `CACHE_ENTRIES`
entries (docs/adr/0039): tokens the API server authenticated, tokens it did
not, allowed and denied decisions; so a flood of invented tokens, or of
denied requests, only ever evicts its own kind, never the answers a real
scraper is served from.

At most `MAX_CONCURRENT_REVIEWS` reviews are in flight at once and at most
`MAX_WAITING_REVIEWS` requests wait for one, each for `SLOT_WAIT_SECONDS`
at most; a request that finds the queue full, or does not get a slot in
time, is answered 429 with a Retry-After at once: a flood costs the API
server a bounded rate and this process a bounded queue, and requests served
from the caches never wait.
"""

import asyncio
import hashlib
import logging
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

AUTHENTICATED_SECONDS = 60.0
ALLOWED_SECONDS = 300.0
DENIED_SECONDS = 30.0
CACHE_ENTRIES = 1024
MAX_CONCURRENT_REVIEWS = 4
MAX_WAITING_REVIEWS = 32
SLOT_WAIT_SECONDS = 1.0
RETRY_AFTER_SECONDS = 1
REVIEW_TIMEOUT_SECONDS = 10.0

log = logging.getLogger(__name__)

K = TypeVar("K")
V = TypeVar("V")


@dataclass(frozen=True)
class User:
    """The user a TokenReview authenticated: what a SubjectAccessReview asks about."""

    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()


class ReviewUnavailableError(Exception):
    """The API server did not answer a review; the request gets a 503."""


class ReviewsBusyError(Exception):
    """No review slot within the bound; the request gets a 429 with Retry-After."""


class Reviews(Protocol):
    async def authenticate(self, token: str) -> User | None:
        """The token's user, or None when the API server does not authenticate it."""

    async def authorize(self, user: User, verb: str, path: str) -> bool:
        """Whether `user` may `verb` the non-resource URL `path`."""


class ExpiringCache(Generic[K, V]):
    """At most `size` entries, least recently used evicted first, each dropped at
    its own expiry (monotonic seconds)."""

    def __init__(self, size: int, clock: Callable[[], float] = time.monotonic) -> None:
        self._size, self._clock = size, clock
        self._entries: OrderedDict[K, tuple[float, V]] = OrderedDict()

    def get(self, key: K) -> tuple[V] | None:
        """(value,) while the entry lives, else None (a cached None is `(None,)`)."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        if entry[0] <= self._clock():
            del self._entries[key]
            return None
        self._entries.move_to_end(key)
        return (entry[1],)

    def put(self, key: K, value: V, ttl: float) -> None:
        self._entries[key] = (self._clock() + ttl, value)
        self._entries.move_to_end(key)
        while len(self._entries) > self._size:
            self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)


class ReviewSlots:
    """At most `concurrent` holders at once and `waiting` waiters, each for `wait`
    seconds at most: past either bound, ReviewsBusyError instead of a place in line."""

    def __init__(self, concurrent: int, waiting: int, wait: float) -> None:
        self._semaphore = asyncio.Semaphore(concurrent)
        self._max_waiting, self._wait = waiting, wait
        self.waiting = 0

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        if self._semaphore.locked():
            if self.waiting >= self._max_waiting:
                raise ReviewsBusyError
            self.waiting += 1
            try:
                async with asyncio.timeout(self._wait):
                    await self._semaphore.acquire()
            except TimeoutError:
                raise ReviewsBusyError from None
            finally:
                self.waiting -= 1
        else:
            await self._semaphore.acquire()
        try:
            yield
        finally:
            self._semaphore.release()


class ApiReviews:
    """TokenReview and SubjectAccessReview through the program's API client."""

    def __init__(self, api: client.ApiClient, timeout: float = REVIEW_TIMEOUT_SECONDS) -> None:
        self._authentication = client.AuthenticationV1Api(api)
        self._authorization = client.AuthorizationV1Api(api)
        self._timeout = timeout

    async def authenticate(self, token: str) -> User | None:
        review = client.V1TokenReview(spec=client.V1TokenReviewSpec(token=token))
        status = await self._review(self._authentication.create_token_review(review))
        if not status.authenticated or status.user is None:
            return None
        user = status.user
        return User(
            name=user.username or "",
            uid=user.uid or "",
            groups=tuple(user.groups or ()),
            extra=tuple(sorted((k, tuple(v)) for k, v in (user.extra or {}).items())),
        )

    async def authorize(self, user: User, verb: str, path: str) -> bool:
        spec = client.V1SubjectAccessReviewSpec(
            user=user.name,
            uid=user.uid,
            groups=list(user.groups),
            extra={key: list(values) for key, values in user.extra},
            non_resource_attributes=client.V1NonResourceAttributes(path=path, verb=verb),
        )
        review = client.V1SubjectAccessReview(spec=spec)
        status = await self._review(self._authorization.create_subject_access_review(review))
        return bool(status.allowed) and not status.denied

    async def _review(self, call: Awaitable[Any]) -> Any:
        """The review's status; ReviewUnavailableError on any failure to get one. Only
        the failure's type, or the API server's status and reason, is logged: a
        message could quote the request."""
        try:
            answer = await asyncio.wait_for(call, self._timeout)
        except ApiException as error:  # 403: this program may not create the review
            log.warning("metrics access review refused: %s %s", error.status, error.reason)
            raise ReviewUnavailableError from None
        except Exception as error:
            log.warning("metrics access review failed: %s", type(error).__name__)
            raise ReviewUnavailableError from None
        if answer.status is None:
            log.warning("metrics access review answered without a status")
            raise ReviewUnavailableError
        return answer.status


def bearer_token(request: web.Request) -> str | None:
    """The token of an `Authorization: Bearer <token>` header, else None."""
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


class MetricsAuth:
    """The aiohttp middleware that puts every request of a listener behind the reviews."""

    def __init__(
        self,
        reviews: Reviews,
        *,
        size: int = CACHE_ENTRIES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._reviews = reviews
        self._users = ExpiringCache[bytes, User](size, clock)
        self._strangers = ExpiringCache[bytes, None](size, clock)
        self._allowed = ExpiringCache[tuple[User, str, str], None](size, clock)
        self._denied = ExpiringCache[tuple[User, str, str], None](size, clock)
        self.slots = ReviewSlots(MAX_CONCURRENT_REVIEWS, MAX_WAITING_REVIEWS, SLOT_WAIT_SECONDS)

    def middleware(self) -> Middleware:
        @web.middleware
        async def reviewed(request: web.Request, handler: Handler) -> web.StreamResponse:
            try:
                refusal = await self._refusal(request)
            except ReviewUnavailableError:
                return web.Response(status=503, text="access review unavailable, retry later")
            except ReviewsBusyError:
                return web.Response(
                    status=429,
                    text="too many access reviews waiting, retry later",
                    headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
                )
            return refusal if refusal is not None else await handler(request)

        return reviewed

    async def _refusal(self, request: web.Request) -> web.Response | None:
        token = bearer_token(request)
        if token is None:
            return web.Response(status=401, text="Unauthorized")
        user = await self._user(token)
        if user is None:
            return web.Response(status=401, text="Unauthorized")
        if not await self._is_allowed(user, request.method.lower(), request.path):
            return web.Response(status=403, text=f"Authorization denied for user {user.name}")
        return None

    async def _user(self, token: str) -> User | None:
        key = hashlib.sha256(token.encode()).digest()
        if (cached := self._users.get(key)) is not None:
            return cached[0]
        if self._strangers.get(key) is not None:
            return None
        async with self.slots.slot():
            user = await self._reviews.authenticate(token)
        if user is None:
            self._strangers.put(key, None, AUTHENTICATED_SECONDS)
        else:
            self._users.put(key, user, AUTHENTICATED_SECONDS)
        return user

    async def _is_allowed(self, user: User, verb: str, path: str) -> bool:
        key = (user, verb, path)
        if self._allowed.get(key) is not None:
            return True
        if self._denied.get(key) is not None:
            return False
        async with self.slots.slot():
            allowed = await self._reviews.authorize(user, verb, path)
        if allowed:
            self._allowed.put(key, None, ALLOWED_SECONDS)
        else:
            self._denied.put(key, None, DENIED_SECONDS)
        return allowed
