"""One memory budget for the request bodies all admissions hold at once, decoded.

A peer that opens many connections and sends each a large (or small but
compressed) body that never ends would otherwise make the process buffer the
sum, past the pod's memory limit; and a small body can decode to many times
its size. Every request reserves what it is about to read or inflate before
reading it, and what it will hold decoded before decoding it (the caller
estimates both, `common.decode_cost`); what the budget cannot give within
`wait` seconds is refused (the caller answers 429), and a reservation is
returned on every path out of the request, cancellation included.
"""

import asyncio
import contextlib
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field


class OverBudgetError(Exception):
    """The budget could not give the bytes in time."""


@dataclass
class MemoryBudget:
    """`total` bytes shared by all requests; a reservation waits at most `wait` seconds.

    Waiters are served first come, first served, so a large request is not
    starved by a stream of small ones.
    """

    total: int
    wait: float
    available: int = field(init=False)
    _waiters: deque[tuple[int, asyncio.Future[None]]] = field(init=False, default_factory=deque)

    def __post_init__(self) -> None:
        self.available = self.total

    @property
    def queued(self) -> int:
        """Reservations waiting for their share."""
        return len(self._waiters)

    @contextlib.contextmanager
    def hold(self) -> Iterator["Reservation"]:
        """A reservation that grows as a request reads, returned in full on exit."""
        reservation = Reservation(self)
        try:
            yield reservation
        finally:
            self._release(reservation.size)

    async def _take(self, size: int) -> None:
        if size > self.total:
            raise OverBudgetError
        if not self._waiters and self.available >= size:
            self.available -= size
            return
        granted = asyncio.get_running_loop().create_future()
        self._waiters.append((size, granted))
        try:
            async with asyncio.timeout(self.wait):
                await granted
        except BaseException as error:
            if granted.done() and not granted.cancelled():
                self._release(size)  # given just as the wait ended
            else:
                granted.cancel()
                self._wake()  # the ones queued behind may fit now
            if isinstance(error, TimeoutError):
                raise OverBudgetError from None
            raise

    def _release(self, size: int) -> None:
        self.available += size
        self._wake()

    def _wake(self) -> None:
        while self._waiters:
            size, granted = self._waiters[0]
            if granted.done():
                self._waiters.popleft()
            elif size <= self.available:
                self.available -= size
                granted.set_result(None)
                self._waiters.popleft()
            else:
                return


@dataclass
class Reservation:
    """What one request holds of the budget."""

    budget: MemoryBudget
    size: int = 0

    async def grow_to(self, size: int) -> None:
        """Hold at least `size` bytes; raises OverBudgetError after the budget's wait."""
        if size > self.size:
            await self.budget._take(size - self.size)
            self.size = size
