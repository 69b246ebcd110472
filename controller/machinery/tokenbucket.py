"""A token bucket: `qps` tokens a second on average, at most `burst` saved up.

Used twice, as client-go does: the work queue's bound on retries, and the
client's bound on requests to the API server (`--kube-api-qps`,
`--kube-api-burst`). A caller reserves a token and is told how long until
it exists, so callers are served in the order they asked.
"""

import time
from collections.abc import Callable


class TokenBucket:
    def __init__(self, qps: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.qps, self.burst, self._clock = qps, burst, clock
        self._tokens = float(burst)
        self._at = clock()

    def reserve(self) -> float:
        """Take a token; seconds until it exists (0 when one was there)."""
        now = self._clock()
        self._tokens = min(self.burst, self._tokens + (now - self._at) * self.qps)
        self._at = now
        self._tokens -= 1
        return 0.0 if self._tokens >= 0 else -self._tokens / self.qps
