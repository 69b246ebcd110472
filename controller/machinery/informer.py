"""List-then-watch of one kind into a Cache, telling a handler about every change.

Watches start at the list's resourceVersion with bookmarks on, so a quiet
kind still advances its resume point. A stream that ends, or breaks
because the connection did, is resumed from the last version seen (a
broken one after a backoff). Any other failure (`410 Gone`, an unreadable
or malformed event, an error of our own) relists after a backoff, and the
relist reports as changes whatever moved or vanished in between, so no
change is lost. From a failure until a watch is open again the informer
is not `fresh`, which turns readiness red.

An optional resource (a kind whose CRD may not be installed) whose list
answers 404 is not served: its cache counts as synced and fresh, empty and
not `served`, so it holds up neither cache sync nor readiness, and the list
is tried again every ABSENT_RETRY_SECONDS until the API appears; then it is
listed and watched like any other, and `on_served` is told.
"""

import asyncio
import logging
import random
from collections.abc import Callable
from typing import Any

from trussium_operator.controller.machinery.backoff import Backoff
from trussium_operator.controller.machinery.cache import Cache, Change
from trussium_operator.controller.machinery.kube import (
    JSON,
    ApiError,
    Kube,
    KubeError,
    Resource,
    TransportError,
    describe,
)
from trussium_operator.controller.machinery.names import NamespacedName

log = logging.getLogger("controller.informer")
PAGE_SIZE = 500
# client-go's rule: a watch closed within a second with no event is a failure, not a resume.
SHORT_WATCH_SECONDS = 1.0
# How often an optional resource's absent API is looked for (one small list each time).
ABSENT_RETRY_SECONDS = 10.0


class GoneError(Exception):
    """The watch's resourceVersion is too old: relist."""


class ShortWatchError(Exception):
    """The server closed a watch at once without an event."""


class NotServedError(Exception):
    """An optional resource's API is not served (its CRD is not installed)."""


class Informer:
    def __init__(
        self,
        kube: Kube,
        resource: Resource,
        on_change: Callable[[Change], None],
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        accept: tuple[str, str] = (JSON, JSON),
        cache: Cache | None = None,
        backoff: Backoff | None = None,
        optional: bool = False,
        on_served: Callable[[], None] = lambda: None,
        absent_retry: float = ABSENT_RETRY_SECONDS,
    ) -> None:
        self.kube = kube
        self.resource = resource
        self.cache = cache or Cache()
        self._on_change = on_change
        self._path = resource.path(namespace)
        self._selector = {"labelSelector": label_selector} if label_selector else {}
        self._list_accept, self._watch_accept = accept
        self._backoff = backoff or Backoff()
        self._version = ""  # where the next watch starts: the last version handled
        self._optional = optional
        self._on_served = on_served
        self._absent_retry = absent_retry

    async def run(self) -> None:
        """List and watch until cancelled; no failure ends it."""
        while True:
            try:
                await self._list_and_watch()
            except NotServedError:
                await asyncio.sleep(self._absent_retry * (1 + 0.2 * random.random()))
            except Exception as error:
                await self._back_off(error, "relisting")

    async def _back_off(self, error: Exception, then: str) -> None:
        self.cache.fresh = False
        delay = self._backoff.failed()
        fields = self._fields() | {"retryInSeconds": round(delay, 2), "then": then}
        if isinstance(error, GoneError | ShortWatchError) or (
            isinstance(error, ApiError) and error.status == 410
        ):
            log.info("watch expired", extra={"fields": fields})
        elif isinstance(error, KubeError):
            fields["error"] = describe(error)
            log.warning("list or watch failed", extra={"fields": fields})
        else:
            log.error("informer failed, restarting it", exc_info=error, extra={"fields": fields})
        await asyncio.sleep(delay)

    def _opened(self) -> None:
        """A list completed or a watch was accepted: up to date from here on."""
        self.cache.fresh = True
        self._backoff.healthy()

    def _fields(self) -> dict[str, Any]:
        return {"kind": self.resource.kind}

    async def _list_and_watch(self) -> None:
        self._version = await self._list()
        self._opened()
        loop = asyncio.get_running_loop()
        while True:
            started = loop.time()
            try:
                events = await self._watch()
            except TransportError as error:
                # Nothing was lost with the connection: resume where the stream broke.
                await self._back_off(error, "resuming")
                continue
            if not events and loop.time() - started < SHORT_WATCH_SECONDS:
                raise ShortWatchError

    async def _list(self) -> str:
        """List everything; a failed list (not a broken watch) marks the cache unreliable."""
        self.cache.store.listing()
        try:
            items, version = await self._list_pages()
        except ApiError as error:
            if not (self._optional and error.not_found):
                self.cache.last_error = str(error)
                raise
            self._settle(served=False, items=[])
            raise NotServedError from error
        except KubeError as error:
            self.cache.last_error = str(error)
            raise
        self._settle(served=True, items=items)
        return version

    def _settle(self, *, served: bool, items: list[dict[str, Any]]) -> None:
        """A list answered: the store holds `items` (none while the API is not served)."""
        for change in self.cache.store.replace(items):
            self._on_change(change)
        was_served, self.cache.served = self.cache.served, served
        if was_served != served:
            log.info(
                "API served" if served else "API not served, looking for it again periodically",
                extra={"fields": self._fields()},
            )
            if served:
                self._on_served()
        self.cache.last_error = None
        if not served:
            self._opened()  # up to date: there is nothing to watch
        self.cache.synced.set()

    async def _list_pages(self) -> tuple[list[dict[str, Any]], str]:
        """Every page, keeping only what the store admits as each arrives, so a scoped
        store's list never holds what it would drop."""
        items: list[dict[str, Any]] = []
        query: dict[str, Any] = self._selector | {"limit": PAGE_SIZE}
        while True:
            page = await self.kube.request("GET", self._path, query=query, accept=self._list_accept)
            items += filter(self.cache.store.admits, page.get("items") or ())
            token = page.get("metadata", {}).get("continue")
            if not token:
                break
            query = query | {"continue": token}
        return items, str(page["metadata"]["resourceVersion"])

    async def _watch(self) -> int:
        """One watch request until the server ends it; how many events came.

        The resume point advances with every event handled, so a stream that
        breaks resumes after the last event applied, never replaying one (a
        replayed ADDED would put an old object back in the cache)."""
        query = self._selector | {
            "resourceVersion": self._version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": random.randint(300, 600),
        }
        events = 0
        stream = self.kube.watch(self._path, query, accept=self._watch_accept, opened=self._opened)
        async for event in stream:
            self._version = self._handle(event, self._version)
            events += 1
        return events

    def _held(self, obj: dict[str, Any]) -> bool:
        """The store holds this very version already: a write's answer, stored by the
        writer (a runtime's status), comes back as its own event."""
        meta = obj.get("metadata") or {}
        version, name = meta.get("resourceVersion"), meta.get("name")
        if not version or not name:
            return False
        held = self.cache.store.get(NamespacedName(meta.get("namespace") or "", name))
        return held is not None and held["metadata"].get("resourceVersion") == version

    def _handle(self, event: dict[str, Any], version: str) -> str:
        kind, obj = event.get("type"), event.get("object") or {}
        if kind == "ERROR":
            if obj.get("code") == 410:
                raise GoneError
            raise ApiError(int(obj.get("code", 500)), obj.get("reason", ""), obj.get("message", ""))
        new_version = str(obj.get("metadata", {}).get("resourceVersion", version))
        if kind == "BOOKMARK":
            return new_version
        if kind in ("ADDED", "MODIFIED"):
            if self._held(obj):
                return new_version
            change = self.cache.store.upsert(obj)
        elif kind == "DELETED":
            change = self.cache.store.delete(obj)
        else:
            return version
        if change is not None:
            self._on_change(change)
        return new_version
