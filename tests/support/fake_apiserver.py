"""A misbehaving API server on loopback, for the controller's transport edge cases.

It serves empty lists for every kind, one Lease, and watches whose
behaviour a test scripts per call: hold the stream open, close it at once,
drop the connection, send a 410, an over-long line or a malformed event.
It records every list and lease request with its time, so tests can count
LISTs in a window or see when the Lease was renewed and released.
Real Kubernetes behaviour is proven on the local control plane (tests/faults);
this only makes the rare failures happen on demand.
"""

import asyncio
import json
import time
from collections import deque
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from aiohttp import web
from kubernetes_asyncio import client

from trussium_operator.controller.machinery.kube import Kube

LEASE_PREFIX = "/apis/coordination.k8s.io/v1/namespaces/"
OVERLONG_LINE_BYTES = 5 * 1024 * 1024


class Watch(Enum):
    HOLD = "hold"  # a bookmark; at end_watches() another (newest version), then the end
    CLOSE = "close"  # 200 and an empty stream, at once
    DROP = "drop"  # the connection is cut without an answer
    BREAK = "break"  # a bookmark of a newer version, then the connection is cut
    GONE = "gone"  # an ERROR event with code 410
    GONE_STATUS = "gone-status"  # the watch request itself answered 410
    OVERLONG = "overlong"  # one line longer than the client accepts
    MALFORMED = "malformed"  # valid JSON, not a watch event


class Lease(Enum):
    SERVE = "serve"
    DROP = "drop"  # the connection is cut without an answer
    TRUNCATE = "truncate"  # a body shorter than its Content-Length
    ERROR = "error"  # 500
    HANG = "hang"  # no answer until the client gives up


@dataclass
class Script:
    """What the server does next; each deque is consumed one call at a time."""

    watches: dict[str, deque[Watch]] = field(default_factory=dict)
    default_watch: Watch = Watch.HOLD
    leases: deque[Lease] = field(default_factory=deque)
    default_lease: Lease = Lease.SERVE


@dataclass
class Record:
    lists: list[tuple[float, str]] = field(default_factory=list)
    watches: list[tuple[float, str, str]] = field(default_factory=list)  # (time, path, version)
    lease_writes: list[tuple[float, str]] = field(default_factory=list)  # (time, holder)


class FakeApiServer:
    def __init__(self) -> None:
        self.script = Script()
        self.record = Record()
        self.lease: dict[str, Any] | None = None
        self.list_gates: dict[str, asyncio.Event] = {}  # a path's lists wait for its gate
        self.held: dict[str, int] = {}  # watches held open right now, per path
        self._version = 1
        self._end_watches = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self.port = 0

    async def start(self) -> "FakeApiServer":
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.1)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self

    async def stop(self) -> None:
        self.end_watches()
        if self._runner is not None:
            await self._runner.cleanup()

    def kube(self) -> Kube:
        configuration = client.Configuration(host=f"http://127.0.0.1:{self.port}")
        return Kube(client.ApiClient(configuration))

    def lists_of(self, path: str) -> list[float]:
        return [at for at, p in self.record.lists if p == path]

    def watches_of(self, path: str) -> list[tuple[float, str]]:
        """(time, resourceVersion) of each watch request on `path`."""
        return [(at, version) for at, p, version in self.record.watches if p == path]

    def bump(self) -> str:
        """Advance the resourceVersion (as any write elsewhere would); the new one."""
        self._version += 1
        return str(self._version)

    def end_watches(self) -> None:
        """Close every held watch normally (as the server's timeout would)."""
        self._end_watches.set()
        self._end_watches = asyncio.Event()

    def watch_script(self, path: str) -> deque[Watch]:
        return self.script.watches.setdefault(path, deque())

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        if request.path.startswith(LEASE_PREFIX):
            return await self._lease(request)
        if request.query.get("watch") == "true":
            version = request.query.get("resourceVersion", "")
            self.record.watches.append((time.monotonic(), request.path, version))
            script = self.watch_script(request.path)
            return await self._watch(request, script.popleft() if script else None)
        self.record.lists.append((time.monotonic(), request.path))
        gate = self.list_gates.get(request.path)
        if gate is not None:
            await gate.wait()
        return web.json_response(
            {"kind": "List", "metadata": {"resourceVersion": str(self._version)}, "items": []}
        )

    async def _watch(self, request: web.Request, mode: Watch | None) -> web.StreamResponse:
        mode = mode or self.script.default_watch
        if mode is Watch.DROP:
            return _drop(request)
        if mode is Watch.GONE_STATUS:
            return web.json_response({"reason": "Expired", "code": 410}, status=410)
        response = web.StreamResponse()
        await response.prepare(request)
        line: bytes
        if mode is Watch.CLOSE:
            return response
        if mode is Watch.BREAK:
            self.bump()
            await response.write(self._bookmark())
            return _drop(request)
        if mode is Watch.GONE:
            line = _event("ERROR", {"code": 410, "reason": "Expired"})
        elif mode is Watch.OVERLONG:
            line = b'{"type":"ADDED","object":"' + b"x" * OVERLONG_LINE_BYTES + b'"}\n'
        elif mode is Watch.MALFORMED:
            line = _event("ADDED", {"metadata": "not a map"})
        else:
            line = self._bookmark()
        await response.write(line)
        if mode is Watch.HOLD:
            self.held[request.path] = self.held.get(request.path, 0) + 1
            try:
                await self._end_watches.wait()
            finally:
                self.held[request.path] -= 1
            # A last bookmark, as the API server sends before it ends a watch.
            await response.write(self._bookmark())
        return response

    async def _lease(self, request: web.Request) -> web.StreamResponse:
        mode = self.script.leases.popleft() if self.script.leases else self.script.default_lease
        if mode is Lease.DROP:
            return _drop(request)
        if mode is Lease.ERROR:
            return web.json_response({"reason": "InternalError", "code": 500}, status=500)
        if mode is Lease.HANG:
            await asyncio.Event().wait()
        if mode is Lease.TRUNCATE:
            response = web.StreamResponse(headers={"Content-Length": "1000"})
            await response.prepare(request)
            await response.write(b'{"kind":')
            assert request.transport is not None
            request.transport.close()
            return response
        if request.method == "GET":
            if self.lease is None:
                return web.json_response({"reason": "NotFound", "code": 404}, status=404)
            return web.json_response(self.lease)
        body = await request.json()
        if request.method == "PUT" and self.lease is not None:
            sent = body["metadata"].get("resourceVersion")
            if sent != self.lease["metadata"]["resourceVersion"]:
                return web.json_response({"reason": "Conflict", "code": 409}, status=409)
        self._version += 1
        body["metadata"]["resourceVersion"] = str(self._version)
        self.lease = body
        self.record.lease_writes.append((time.monotonic(), body["spec"]["holderIdentity"]))
        return web.json_response(body, status=201 if request.method == "POST" else 200)

    def _bookmark(self) -> bytes:
        return _event("BOOKMARK", {"metadata": {"resourceVersion": str(self._version)}})


def _event(kind: str, obj: dict[str, Any]) -> bytes:
    return json.dumps({"type": kind, "object": obj}).encode() + b"\n"


def _drop(request: web.Request) -> web.StreamResponse:
    """Cut the connection: the client sees ServerDisconnectedError."""
    assert request.transport is not None
    request.transport.close()
    return web.Response()
