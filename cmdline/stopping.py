"""How both servers stop: SIGTERM or SIGINT sets an event, and startup work
that is still waiting (caches, the Lease, a certificate) gives way to it."""

import asyncio
import signal
from collections.abc import Coroutine
from typing import Any


def stop_on_signals() -> asyncio.Event:
    """An event set by SIGTERM or SIGINT (the kubelet's stop, a person's Ctrl-C)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    return stop


async def until_stopped(stop: asyncio.Event, work: Coroutine[Any, Any, None]) -> bool:
    """Await `work` unless `stop` is set first (then cancel it); True when the work
    finished. The work's own error propagates."""
    task = asyncio.create_task(work)
    stopping = asyncio.create_task(stop.wait())
    await asyncio.wait([task, stopping], return_when=asyncio.FIRST_COMPLETED)
    stopping.cancel()
    if not task.done():
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        return False
    task.result()
    return True
