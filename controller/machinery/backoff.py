"""The retry delay of a list-and-watch loop (client-go reflector's numbers).

The delay doubles from 0.8 s per failure up to 30 s, and each wait is
jittered between half and all of it, so informers that failed together do
not retry together. It resets only once the loop has stayed healthy for
2 minutes: a watch that connects and breaks at once, or a 410 on every
watch, keeps growing the delay instead of relisting in a tight loop.
`honouring` lengthens any retry delay to a throttled answer's `Retry-After`.
"""

import random
import time
from collections.abc import Callable

BASE_SECONDS = 0.8
CAP_SECONDS = 30.0
HEALTHY_RESET_SECONDS = 120.0


def honouring(delay: float, retry_after: float | None, cap: float) -> float:
    """`delay`, lengthened to the `Retry-After` the API server asked for (ADR 0038),
    which counts only up to `cap`: a delay longer than `cap` stays as it is."""
    return delay if retry_after is None else max(delay, min(retry_after, cap))


class Backoff:
    def __init__(
        self,
        base: float = BASE_SECONDS,
        cap: float = CAP_SECONDS,
        reset_after: float = HEALTHY_RESET_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        self.base, self.cap, self.reset_after = base, cap, reset_after
        self._clock, self._jitter = clock, jitter
        self._failures = 0
        self._healthy_since: float | None = None

    def healthy(self) -> None:
        """The loop works again (listed, watching); the clock toward a reset starts now."""
        if self._healthy_since is None:
            self._healthy_since = self._clock()

    def failed(self) -> float:
        """Seconds to wait before the next attempt."""
        since = self._healthy_since
        if since is not None and self._clock() - since >= self.reset_after:
            self._failures = 0
        self._healthy_since = None
        delay = min(self.base * 2.0**self._failures, self.cap)
        self._failures = min(self._failures + 1, 64)
        return delay * (1 + self._jitter()) / 2
