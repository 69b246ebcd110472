"""A rate-limited work queue of keys, with client-go's semantics.

- A key waiting in the queue is there once, however often it is added.
- A key is processed by one worker at a time: re-added while in flight, it
  waits and is queued again when that worker calls `done`.
- Failures retry with per-key exponential backoff (5 ms doubling to
  1000 s, like controller-runtime), bounded by a global token bucket
  (10/s, burst 100) so a mass failure cannot hammer the API server.
  `forget` resets a key's backoff after a success.
- A retry the API server asked to postpone (`Retry-After`) waits at least
  that long, at most the backoff's cap, and every add of the key meanwhile
  waits for it: the watch events of what the failed attempt did write would
  otherwise bring the key back at once. client-go's queue has no such hold.
"""

import asyncio
import time
from collections import deque
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from trussium_operator.controller.machinery import metrics
from trussium_operator.controller.machinery.backoff import honouring
from trussium_operator.controller.machinery.tokenbucket import TokenBucket

BASE_DELAY = 0.005
MAX_DELAY = 1000.0
QPS = 10.0
BURST = 100
K = TypeVar("K", bound=Hashable)


class ItemBackoff(Generic[K]):
    """Per-key exponential backoff: base * 2^failures, capped."""

    def __init__(self, base: float = BASE_DELAY, cap: float = MAX_DELAY) -> None:
        self.base, self.cap = base, cap
        self._failures: dict[K, int] = {}

    def when(self, key: K) -> float:
        failures = self._failures.get(key, 0)
        self._failures[key] = failures + 1
        return min(self.base * 2.0**failures, self.cap)

    def forget(self, key: K) -> None:
        self._failures.pop(key, None)


class WorkQueue(Generic[K]):
    def __init__(
        self,
        name: str,
        backoff: ItemBackoff[K] | None = None,
        bucket: TokenBucket | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = name
        self.backoff: ItemBackoff[K] = backoff or ItemBackoff()
        self.bucket = bucket or TokenBucket(QPS, BURST)
        self._clock = clock
        self._queue: deque[K] = deque()
        self._dirty: set[K] = set()
        self._processing: set[K] = set()
        self._added_at: dict[K, float] = {}
        self._started_at: dict[K, float] = {}
        self._timers: dict[K, asyncio.TimerHandle] = {}
        # Loop time before which a key the API server throttled is not queued again.
        self._held_until: dict[K, float] = {}
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._shutting_down = False
        metrics.WORKQUEUE_UNFINISHED_WORK.labels(name).set_function(self.unfinished_work_seconds)
        metrics.WORKQUEUE_LONGEST_RUNNING.labels(name).set_function(self.longest_running_seconds)

    def __len__(self) -> int:
        return len(self._queue)

    @property
    def in_flight(self) -> int:
        return len(self._processing)

    def unfinished_work_seconds(self) -> float:
        """Seconds spent so far on the keys being processed (read at scrape time)."""
        now = self._clock()
        return sum(now - started for started in self._started_at.values())

    def longest_running_seconds(self) -> float:
        now = self._clock()
        return max((now - started for started in self._started_at.values()), default=0.0)

    def add(self, key: K) -> None:
        if self._shutting_down or key in self._dirty:
            return
        if (wait := self._held(key)) > 0:
            self.add_after(key, wait)
            return
        metrics.WORKQUEUE_ADDS.labels(self.name).inc()
        self._dirty.add(key)
        self._added_at.setdefault(key, self._clock())
        if key in self._processing:
            return
        self._queue.append(key)
        self._enqueued()

    def _enqueued(self) -> None:
        metrics.WORKQUEUE_DEPTH.labels(self.name).set(len(self._queue))
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def add_after(self, key: K, delay: float) -> None:
        """Add once `delay` has passed; an earlier pending add for the key wins."""
        if delay <= 0:
            self.add(key)
            return
        loop = asyncio.get_running_loop()
        due = loop.time() + delay
        pending = self._timers.get(key)
        if pending is not None:
            if pending.when() <= due:
                return
            pending.cancel()
        self._timers[key] = loop.call_at(due, self._fire, key)

    def _fire(self, key: K) -> None:
        self._timers.pop(key, None)
        self.add(key)

    def add_rate_limited(self, key: K, not_before: float | None = None) -> None:
        """Retry `key` after its backoff, and no sooner than `not_before` seconds (capped at
        the backoff's cap) when given; a key so throttled is held till then, every add of
        it included."""
        metrics.WORKQUEUE_RETRIES.labels(self.name).inc()
        delay = max(self.backoff.when(key), self.bucket.reserve())
        delay = honouring(delay, not_before, self.backoff.cap)
        if not_before is not None:
            self._held_until[key] = asyncio.get_running_loop().time() + delay
        self.add_after(key, delay)

    def _held(self, key: K) -> float:
        """Seconds `key` is still held for (0: not held)."""
        until = self._held_until.get(key)
        if until is None:
            return 0.0
        wait = until - asyncio.get_running_loop().time()
        if wait <= 0:
            del self._held_until[key]
        return max(wait, 0.0)

    def forget(self, key: K) -> None:
        self.backoff.forget(key)
        self._held_until.pop(key, None)

    async def get(self) -> K | None:
        """The next key, or None once the queue is shut down (queued keys are left)."""
        while not self._queue or self._shutting_down:
            if self._shutting_down:
                return None
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                if waiter.done() and self._queue:
                    self._enqueued()  # pass the wake-up on to another worker
                raise
        key = self._queue.popleft()
        now = self._clock()
        metrics.WORKQUEUE_DEPTH.labels(self.name).set(len(self._queue))
        metrics.WORKQUEUE_QUEUE_DURATION.labels(self.name).observe(
            now - self._added_at.pop(key, now)
        )
        self._processing.add(key)
        self._dirty.discard(key)
        self._started_at[key] = now
        return key

    def done(self, key: K) -> None:
        self._processing.discard(key)
        started = self._started_at.pop(key, None)
        if started is not None:
            metrics.WORKQUEUE_WORK_DURATION.labels(self.name).observe(self._clock() - started)
        if key in self._dirty:
            if (wait := self._held(key)) > 0:  # added while throttled: not before the hold ends
                self._dirty.discard(key)
                self._added_at.pop(key, None)
                self.add_after(key, wait)
                return
            self._queue.append(key)
            self._enqueued()

    def shut_down(self) -> None:
        """Stop handing out keys; workers blocked in get() return None."""
        self._shutting_down = True
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        self._held_until.clear()
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
