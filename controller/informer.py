"""List-then-watch of one kind into a Store, telling a handler about every change.

Watches start at the list's resourceVersion with bookmarks on, so a quiet
kind still advances its resume point. A stream that ends is resumed from
the last version seen; `410 Gone` or a broken stream means a relist, and
the relist reports as changes whatever moved or vanished in between, so no
change is lost.
"""

import asyncio
import logging
import random
from collections.abc import Callable
from typing import Any

import aiohttp

from controller.cache import Change, Store
from controller.kube import JSON, ApiError, Kube, Resource

log = logging.getLogger("controller.informer")
PAGE_SIZE = 500
RETRY_SECONDS = (0.5, 8.0)


class GoneError(Exception):
    """The watch's resourceVersion is too old: relist."""


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
        store: Store | None = None,
    ) -> None:
        self.kube = kube
        self.resource = resource
        self.store = store if store is not None else Store()  # an empty Store is falsy
        self.synced = asyncio.Event()
        self.last_error: str | None = None
        self._on_change = on_change
        self._path = resource.path(namespace)
        self._selector = {"labelSelector": label_selector} if label_selector else {}
        self._list_accept, self._watch_accept = accept

    async def run(self) -> None:
        delay = RETRY_SECONDS[0]
        while True:
            try:
                version = await self._list()
                delay = RETRY_SECONDS[0]
                await self._watch(version)
            except GoneError:
                log.info("watch expired, relisting", extra={"fields": self._fields()})
            except (ApiError, aiohttp.ClientError, TimeoutError, ValueError) as error:
                log.warning(
                    "list or watch failed, relisting",
                    extra={"fields": self._fields() | {"error": str(error)}},
                )
                await asyncio.sleep(delay)
                delay = min(delay * 2, RETRY_SECONDS[1])

    def _fields(self) -> dict[str, str]:
        return {"kind": self.resource.kind}

    async def _list(self) -> str:
        """List everything; a failed list (not a broken watch) marks the cache unreliable."""
        try:
            items, version = await self._list_pages()
        except (ApiError, aiohttp.ClientError, TimeoutError, ValueError) as error:
            self.last_error = str(error)
            raise
        for change in self.store.replace(items):
            self._on_change(change)
        self.last_error = None
        self.synced.set()
        return version

    async def _list_pages(self) -> tuple[list[dict[str, Any]], str]:
        items: list[dict[str, Any]] = []
        query: dict[str, Any] = self._selector | {"limit": PAGE_SIZE}
        while True:
            page = await self.kube.request("GET", self._path, query=query, accept=self._list_accept)
            items += page.get("items") or []
            token = page.get("metadata", {}).get("continue")
            if not token:
                break
            query = query | {"continue": token}
        return items, str(page["metadata"]["resourceVersion"])

    async def _watch(self, version: str) -> None:
        while True:
            query = self._selector | {
                "resourceVersion": version,
                "allowWatchBookmarks": "true",
                "timeoutSeconds": random.randint(300, 600),
            }
            async for event in self.kube.watch(self._path, query, accept=self._watch_accept):
                version = self._handle(event, version)

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
            change = self.store.upsert(obj)
        elif kind == "DELETED":
            change = self.store.delete(obj)
        else:
            return version
        self._on_change(change)
        return new_version
