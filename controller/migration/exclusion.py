"""Not reconciling while the Go operator is active: a gate on its leader Lease.

The two operators elect leaders on different Leases, so their own leader
election cannot keep them apart; left alone, both would reconcile the same
runtimes and fight. The Go operator's Lease is `d4fd4c09.trussium.io` in
the namespace it runs in, which its kustomize bundle fixes and its Helm
chart does not, so this gate finds it (ADR 0030): every period it lists
Leases of that name, in every namespace (one request, with the field
selector `metadata.name`, which RBAC authorizes by resource name) or in
the one namespace it is pinned to. It stays closed while any Lease found
is held and fresh. Freshness follows client-go's rule, the one our own
leader election uses: a held Lease is fresh until it has gone unchanged for
its leaseDurationSeconds on our own clock (clock skew between hosts does
not matter; a Lease left behind by a stopped Go operator is therefore
trusted for one more duration after we first see it).

No Lease found means no Go operator. A list that fails (no permission, API
error) keeps the gate as it was, closed at start: unsure, we write nothing.
Failing is loud: /readyz answers 503 with the reason,
`trussium_foreign_lease_unreadable` is 1, and an error names the missing
permission, repeated with backoff until the list succeeds again. The gate
reopens by itself when the Lease expires or is released, without a
restart, and closes again if the Go operator comes back.
"""

import asyncio
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass

from trussium_operator.controller.machinery.kube import LEASES, ApiError, Kube, KubeError, describe
from trussium_operator.controller.machinery.leader import LeaseRecord, can_take, record_of
from trussium_operator.controller.machinery.names import NamespacedName
from trussium_operator.controller.metrics import FOREIGN_LEASE_HELD, FOREIGN_LEASE_UNREADABLE

log = logging.getLogger("controller.migration.exclusion")

# The leader-election ID in the Go operator's main.go.
GO_OPERATOR_LEASE_NAME = "d4fd4c09.trussium.io"
# A failing list is logged at once, then after these many seconds, doubling up to the cap.
REPORT_AGAIN_SECONDS = 30.0
REPORT_CAP_SECONDS = 300.0


@dataclass(frozen=True)
class LeaseSearch:
    """Where to look for the foreign Lease: `name` in `namespace`, or in every
    namespace when `namespace` is empty."""

    name: str = GO_OPERATOR_LEASE_NAME
    namespace: str = ""

    def __str__(self) -> str:
        return f"{self.namespace or '*'}/{self.name}"

    @property
    def scope(self) -> str:
        """As the API server words a forbidden request's scope."""
        return f'in the namespace "{self.namespace}"' if self.namespace else "at the cluster scope"


@dataclass(frozen=True)
class Sighting:
    """A Lease as last listed, and when (on our clock) we first saw this record."""

    record: LeaseRecord
    since: float


class ForeignLeaseGate:
    """Open while no Lease found is held and fresh; closed otherwise, and at start."""

    def __init__(
        self,
        kube: Kube,
        search: LeaseSearch,
        identity: str,
        period: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.kube, self.search, self.identity, self.period = kube, search, identity, period
        self._clock = clock
        self._open = asyncio.Event()
        self._checked = False
        self._seen: dict[NamespacedName, Sighting] = {}
        self._held: dict[NamespacedName, str] = {}
        self._labelled: set[NamespacedName] = set()
        self._problem = ""
        self._next_report = 0.0
        self._report_interval = REPORT_AGAIN_SECONDS
        FOREIGN_LEASE_UNREADABLE.set(0)

    def is_open(self) -> bool:
        return self._open.is_set()

    async def wait_open(self) -> None:
        await self._open.wait()

    def not_ready(self) -> str:
        """Why readiness fails because of this gate; empty when it does not."""
        if self._problem:
            return f"cannot read the Go operator's leader Lease: {self._problem}"
        if not self._checked:
            return f"the Go operator's leader Lease {self.search} not checked yet"
        if self._held:
            held = ", ".join(f"{lease} held by {holder}" for lease, holder in self._held.items())
            return f"waiting for the Go operator's leader Lease to expire or be released: {held}"
        return ""

    async def run(self) -> None:
        """Check every period, forever (cancel to stop)."""
        log.info(
            "looking for the Go operator's leader lease",
            extra={"fields": {"lease": str(self.search)}},
        )
        while True:
            await self.check()
            await asyncio.sleep(self.period * (1 + 0.2 * random.random()))

    async def check(self) -> None:
        query = {"fieldSelector": f"metadata.name={self.search.name}"}
        try:
            answer = await self.kube.request(
                "GET", LEASES.path(self.search.namespace or None), query=query
            )
        except KubeError as error:
            self._failed(error)
            return
        now = self._clock()
        seen: dict[NamespacedName, Sighting] = {}
        for lease in answer.get("items") or ():
            key, record = NamespacedName.of(lease), record_of(lease)
            before = self._seen.get(key)
            seen[key] = before if before and before.record == record else Sighting(record, now)
        self._seen = seen
        self._readable()
        self._set(
            {
                key: sighting.record.holder
                for key, sighting in sorted(seen.items())
                if not can_take(sighting.record, self.identity, sighting.since, now)
            }
        )

    def _set(self, held: dict[NamespacedName, str]) -> None:
        """Open or close the gate; log transitions only (so a long wait logs once)."""
        for gone in self._labelled - self._seen.keys():
            FOREIGN_LEASE_HELD.remove(str(gone))
        for key in self._seen:
            FOREIGN_LEASE_HELD.labels(str(key)).set(1 if key in held else 0)
        self._labelled = set(self._seen)
        for key in held.keys() - self._held.keys():
            log.warning(
                "the Go operator holds its leader lease: not reconciling until it expires "
                "(scale the Go operator to zero)",
                extra={"fields": {"lease": str(key), "holder": held[key]}},
            )
        self._held, self._checked = held, True
        if held:
            self._open.clear()
        elif not self._open.is_set():
            self._open.set()
            log.info(
                "no Go operator leader lease is held: reconciling",
                extra={"fields": {"leases": [str(key) for key in sorted(self._seen)]}},
            )

    def _failed(self, error: KubeError) -> None:
        """Keep the gate as it is; say why, at once and then with backoff."""
        problem = self._describe(error)
        now = self._clock()
        FOREIGN_LEASE_UNREADABLE.set(1)
        if problem != self._problem:
            self._problem, self._report_interval, self._next_report = problem, 0.0, now
        if now < self._next_report:
            return
        self._report_interval = min(
            max(self._report_interval * 2, REPORT_AGAIN_SECONDS), REPORT_CAP_SECONDS
        )
        self._next_report = now + self._report_interval
        log.error(
            "cannot read the Go operator's leader lease: %s",
            "still reconciling, but a Go operator started now would go unnoticed"
            if self._open.is_set()
            else "reconciling nothing until it can be read",
            extra={
                "fields": {
                    "error": problem,
                    "verb": "list",
                    "resource": "leases.coordination.k8s.io",
                    "resourceName": self.search.name,
                    "namespace": self.search.namespace or "*",
                    "nextReportSeconds": self._report_interval,
                }
            },
        )

    def _describe(self, error: KubeError) -> str:
        """The failure in words; for a refusal, the permission it lacks."""
        if isinstance(error, ApiError) and error.status == 403:
            return (
                f"{describe(error)}: needs verb list on leases.coordination.k8s.io "
                f"(resourceNames {self.search.name}) {self.search.scope}"
            )
        return describe(error)

    def _readable(self) -> None:
        FOREIGN_LEASE_UNREADABLE.set(0)
        if self._problem:
            log.info(
                "the Go operator's leader lease can be read again",
                extra={"fields": {"lease": str(self.search)}},
            )
        self._problem, self._report_interval = "", REPORT_AGAIN_SECONDS
