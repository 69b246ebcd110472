"""Last-resort teardown: stop every running control plane at interpreter exit
and on SIGINT/SIGTERM, whatever the caller forgot. Components run in their
own sessions, so without this a Ctrl-C would leave them running."""

import atexit
import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Protocol


class Stoppable(Protocol):
    def stop(self) -> None: ...


_live: dict[int, Stoppable] = {}
_lock = threading.RLock()  # re-entrant: a signal may arrive while it is held
_installed = False


def stop_all() -> None:
    with _lock:
        planes = list(_live.values())
    for plane in planes:
        plane.stop()


def _chain(signum: int, previous: object) -> Callable[[int, FrameType | None], None]:
    def handler(received: int, frame: FrameType | None) -> None:
        stop_all()
        if callable(previous):
            previous(received, frame)
        elif previous != signal.SIG_IGN:
            raise SystemExit(128 + signum)

    return handler


def _install() -> None:
    global _installed
    if _installed:
        return
    _installed = True
    atexit.register(stop_all)
    # Signal handlers can only be set from the main thread; atexit still covers the rest.
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, _chain(signum, signal.getsignal(signum)))


def register(plane: Stoppable) -> None:
    with _lock:
        _install()
        _live[id(plane)] = plane


def unregister(plane: Stoppable) -> None:
    with _lock:
        _live.pop(id(plane), None)
