"""Waiting until a condition holds, with a deadline: the poll loop of the tests and the demo.

A wait that times out says what it waited for and the last value it saw,
so a failing test or demo step explains itself.
"""

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")
INTERVAL_SECONDS = 0.25


class WaitTimeoutError(AssertionError):
    """The condition did not hold before the deadline (an assertion failure in a test)."""


def wait_for(
    check: Callable[[], T | None], what: str, timeout: float, interval: float = INTERVAL_SECONDS
) -> T:
    """Call `check` until it returns something truthy, and return that.

    `check` runs at least once, and once more at the deadline, so a slow
    machine never fails a condition that holds by then.
    """
    deadline = time.monotonic() + timeout
    while True:
        last = check()
        if last:
            return last
        if time.monotonic() >= deadline:
            message = f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})"
            raise WaitTimeoutError(message)
        time.sleep(min(interval, max(0.0, deadline - time.monotonic())))
