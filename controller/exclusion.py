"""Not reconciling while the Go operator is active: a gate on its leader Lease.

The two operators elect leaders on different Leases, so their own leader
election cannot keep them apart; left alone, both would reconcile the same
runtimes and fight. This gate watches the Go operator's Lease
(`d4fd4c09.trussium.io`, in the namespace it runs in) and stays closed
while that Lease is held and fresh. Freshness follows client-go's rule,
the one our own leader election uses: a held Lease is fresh until it has
gone unchanged for its leaseDurationSeconds on our own clock (clock skew
between hosts does not matter; a Lease left behind by a stopped Go
operator is therefore trusted for one more duration after we first see it).

No Lease means no Go operator. A Lease we cannot read (no permission, API
error) keeps the gate as it was, closed at start: unsure, we write nothing.
The gate reopens by itself when the Lease expires or is released, without a
restart, and closes again if the Go operator comes back.
"""

import asyncio
import logging
import random
import time
from collections.abc import Callable

from trussium_operator.controller.machinery.kube import LEASES, ApiError, Kube
from trussium_operator.controller.machinery.leader import LeaseRecord, can_take, record_of
from trussium_operator.controller.machinery.names import NamespacedName
from trussium_operator.controller.metrics import FOREIGN_LEASE_HELD

log = logging.getLogger("controller.exclusion")


# The leader-election ID in the Go operator's main.go, in the namespace of its kustomize
# bundle (its Helm chart runs it in the release namespace instead).
GO_OPERATOR_LEASE = NamespacedName("trussium-operator-system", "d4fd4c09.trussium.io")


class ForeignLeaseGate:
    """Open while the foreign Lease is absent, released or expired; closed otherwise."""

    def __init__(
        self,
        kube: Kube,
        lease: NamespacedName,
        identity: str,
        period: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.kube, self.lease, self.identity, self.period = kube, lease, identity, period
        self._clock = clock
        self._open = asyncio.Event()
        self._observed: tuple[LeaseRecord | None, float] = (None, 0.0)
        self._problem = ""
        self._state = "unknown"
        FOREIGN_LEASE_HELD.labels(str(lease)).set(1)

    def is_open(self) -> bool:
        return self._open.is_set()

    async def wait_open(self) -> None:
        await self._open.wait()

    async def run(self) -> None:
        """Check the Lease every period, forever (cancel to stop)."""
        log.info("watching the Go operator's leader lease", extra={"fields": self._fields()})
        while True:
            await self.check()
            await asyncio.sleep(self.period * (1 + 0.2 * random.random()))

    async def check(self) -> None:
        try:
            lease = await self.kube.request("GET", LEASES.path(*self.lease))
        except ApiError as error:
            if error.not_found:
                self._set(held_by=None)
            else:
                self._report(f"{error.status} {error.reason}")
            return
        except (OSError, TimeoutError) as error:
            self._report(type(error).__name__)
            return
        record = record_of(lease)
        now = self._clock()
        if record != self._observed[0]:
            self._observed = (record, now)
        free = can_take(record, self.identity, self._observed[1], now)
        self._set(held_by=None if free else record.holder)

    def _set(self, held_by: str | None) -> None:
        """Open or close the gate; log transitions only (so a long wait logs once)."""
        self._problem = ""
        state = "open" if held_by is None else "held"
        if state == self._state:
            return
        self._state = state
        if held_by is None:
            self._open.set()
            FOREIGN_LEASE_HELD.labels(str(self.lease)).set(0)
            log.info(
                "the Go operator's lease is free: reconciling", extra={"fields": self._fields()}
            )
            return
        self._open.clear()
        FOREIGN_LEASE_HELD.labels(str(self.lease)).set(1)
        log.warning(
            "the Go operator holds its leader lease: not reconciling until it expires "
            "(scale the Go operator to zero)",
            extra={"fields": self._fields() | {"holder": held_by}},
        )

    def _report(self, problem: str) -> None:
        """Keep the gate as it is; say so once per distinct problem."""
        if problem != self._problem:
            self._problem = problem
            log.warning(
                "cannot read the Go operator's leader lease; keeping the gate %s",
                "open" if self._open.is_set() else "closed",
                extra={"fields": self._fields() | {"error": problem}},
            )

    def _fields(self) -> dict[str, str]:
        return {"lease": str(self.lease)}
