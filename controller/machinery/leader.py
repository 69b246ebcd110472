"""Leader election on a coordination.k8s.io/v1 Lease, with client-go's rules.

- A Lease held by someone else is taken only when it is free (empty
  holder) or its holder has not renewed for leaseDurationSeconds, measured
  on our own clock from when we last saw the record change (so clock skew
  between hosts does not matter).
- The leader renews every retry period; if no renewal succeeds within the
  renew deadline it has lost the lease and must stop reconciling at once
  (the manager then exits non-zero, like controller-runtime). A failed
  renewal, whatever the API server or the network did, is only retried:
  the renew deadline alone decides. Each attempt gets half the deadline,
  so one hung connection cannot use it all up.
- A standby retries every failed acquire attempt; each attempt is bounded
  by the renew deadline, so a hung API server cannot stall it.
- Releasing on shutdown empties the holder, so a standby takes over on its
  next retry instead of waiting out the lease.
"""

import asyncio
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from trussium_operator.controller.machinery import metrics
from trussium_operator.controller.machinery.kube import (
    LEASES,
    ApiError,
    Kube,
    KubeError,
    describe,
    micro_time,
)
from trussium_operator.controller.machinery.names import NamespacedName

log = logging.getLogger("controller.leader")
RELEASE_SECONDS = 5.0


class LeadershipLostError(Exception):
    """No renewal succeeded within the renew deadline."""


@dataclass(frozen=True)
class LeaseRecord:
    holder: str
    duration: int
    renew_time: str | None
    transitions: int


def record_of(lease: dict[str, Any]) -> LeaseRecord:
    spec = lease.get("spec") or {}
    return LeaseRecord(
        holder=spec.get("holderIdentity") or "",
        duration=int(spec.get("leaseDurationSeconds") or 0),
        renew_time=spec.get("renewTime"),
        transitions=int(spec.get("leaseTransitions") or 0),
    )


def can_take(record: LeaseRecord, identity: str, observed_at: float, now: float) -> bool:
    """Ours already, released, or unrenewed for its whole duration since we saw it change."""
    return record.holder in ("", identity) or now >= observed_at + record.duration


def claimed_spec(
    previous: dict[str, Any] | None, identity: str, duration: int, now: datetime
) -> dict[str, Any]:
    """The Lease spec that makes `identity` the holder, renewed at `now`."""
    spec = dict(previous or {})
    stamp = micro_time(now)
    if spec.get("holderIdentity") != identity:
        spec["acquireTime"] = stamp
        if previous is not None:
            spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
    spec.update(holderIdentity=identity, leaseDurationSeconds=duration, renewTime=stamp)
    spec.setdefault("leaseTransitions", 0)
    return spec


def released_spec(previous: dict[str, Any], now: datetime) -> dict[str, Any]:
    return previous | {
        "holderIdentity": "",
        "leaseDurationSeconds": 1,
        "renewTime": micro_time(now),
    }


@dataclass(frozen=True)
class Timing:
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0


class LeaderElector:
    def __init__(
        self,
        kube: Kube,
        lease: NamespacedName,
        identity: str,
        timing: Timing = Timing(),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.kube, self.lease, self.identity = kube, lease, identity
        self.timing = timing
        self._clock = clock
        self._lease: dict[str, Any] | None = None
        self._observed: tuple[LeaseRecord | None, float] = (None, 0.0)
        self._renewed_at = 0.0
        self.leading = False
        metrics.LEADER.labels(lease.name).set(0)
        metrics.LEADER_SLOWPATH.labels(lease.name)

    async def acquire(self) -> None:
        """Return once this process holds the Lease."""
        log.info("waiting for the leader lease", extra={"fields": self._fields()})
        while True:
            attempt = self._clock()
            try:
                async with asyncio.timeout(self.timing.renew_deadline):
                    if await self._try():
                        break
            except (KubeError, TimeoutError) as error:
                log.warning("cannot acquire the lease", extra={"fields": self._failure(error)})
            await asyncio.sleep(self.timing.retry_period * (1 + 0.2 * random.random()))
        self.leading = True
        self._renewed_at = attempt
        metrics.LEADER.labels(self.lease.name).set(1)
        log.info("became leader", extra={"fields": self._fields()})

    def valid(self) -> bool:
        """Whether the last renewal is recent enough to act as leader right now.

        Checked before every reconcile, so a process that was frozen past its
        renew deadline does not write even once before the renew loop notices.
        """
        return self.leading and self._clock() - self._renewed_at < self.timing.renew_deadline

    async def hold(self) -> None:
        """Renew until the renew deadline passes without success; then raise LeadershipLostError."""
        while True:
            await asyncio.sleep(self.timing.retry_period)
            last = self._renewed_at
            # A renewal counts from when it was sent: a standby can only have seen
            # the renewed record (and start its own countdown) after that.
            attempt = self._clock()
            remaining = last + self.timing.renew_deadline - attempt
            renewed = False
            try:
                # asyncio.timeout, not wait_for: on Python 3.11 wait_for swallows a
                # cancellation that arrives as the renewal completes, and hold() would
                # then renew on after being told to stop.
                if remaining > 0:
                    async with asyncio.timeout(min(remaining, self.timing.renew_deadline / 2)):
                        renewed = await self._try()
            except (KubeError, TimeoutError) as error:
                log.warning("lease renewal failed", extra={"fields": self._failure(error)})
                renewed = False
            if renewed:
                self._renewed_at = attempt
            elif self._clock() - last >= self.timing.renew_deadline:
                self._lost()
                raise LeadershipLostError(f"lease {self.lease} not renewed in time")

    def _lost(self) -> None:
        self.leading = False
        metrics.LEADER.labels(self.lease.name).set(0)
        log.error("leader lease lost", extra={"fields": self._fields()})

    async def release(self) -> None:
        """Hand the Lease over at once (best effort, bounded: it expires anyway).

        A renewal cancelled while its PUT was on the wire may still have landed, leaving
        our copy one version behind: on that conflict the Lease is read again, and
        released from the fresh copy if it is still ours."""
        if not self.leading or self._lease is None:
            return
        self.leading = False
        metrics.LEADER.labels(self.lease.name).set(0)
        try:
            async with asyncio.timeout(RELEASE_SECONDS):
                try:
                    await self._put_released(self._lease)
                except ApiError as error:
                    if not error.conflict:
                        raise
                    current = await self._get()
                    if record_of(current).holder != self.identity:
                        return
                    await self._put_released(current)
            log.info("leader lease released", extra={"fields": self._fields()})
        except (KubeError, TimeoutError) as error:
            log.warning("cannot release the lease", extra={"fields": self._failure(error)})

    async def _put_released(self, lease: dict[str, Any]) -> None:
        released = lease | {"spec": released_spec(lease["spec"], datetime.now(UTC))}
        await self.kube.request("PUT", LEASES.path(*self.lease), body=released)

    def _fields(self) -> dict[str, str]:
        return {"lease": str(self.lease), "identity": self.identity}

    def _failure(self, error: Exception) -> dict[str, str]:
        return self._fields() | {"error": describe(error)}

    async def _try(self) -> bool:
        """One acquire-or-renew attempt; a renewal reuses the Lease we wrote last (one PUT,
        client-go's fast path); after a conflict it reads the Lease first (the slow path)."""
        fast = self.leading and self._lease is not None
        try:
            lease = self._lease if fast and self._lease else await self._get()
        except ApiError as error:
            if not error.not_found:
                raise
            return await self._create()
        record = record_of(lease)
        now = self._clock()
        if record != self._observed[0]:
            self._observed = (record, now)
        if not can_take(record, self.identity, self._observed[1], now):
            return False
        if self.leading and not fast:
            metrics.LEADER_SLOWPATH.labels(self.lease.name).inc()
        body = lease | {
            "spec": claimed_spec(
                lease.get("spec"),
                self.identity,
                int(self.timing.lease_duration),
                datetime.now(UTC),
            )
        }
        try:
            self._lease = await self.kube.request("PUT", LEASES.path(*self.lease), body=body)
        except ApiError as error:
            if error.conflict:
                self._lease = None
                return False
            raise
        return True

    async def _get(self) -> dict[str, Any]:
        return await self.kube.request("GET", LEASES.path(*self.lease))

    async def _create(self) -> bool:
        body = {
            "apiVersion": LEASES.api_version,
            "kind": "Lease",
            "metadata": {"name": self.lease.name, "namespace": self.lease.namespace},
            "spec": claimed_spec(
                None, self.identity, int(self.timing.lease_duration), datetime.now(UTC)
            ),
        }
        try:
            self._lease = await self.kube.request(
                "POST", LEASES.path(self.lease.namespace), body=body
            )
        except ApiError as error:
            if error.conflict:
                return False
            raise
        return True
