"""Posting events.k8s.io/v1 Events about a TrussiumRuntime.

What to say is decided in common.events; this names, addresses and posts it.
The reconciler posts a transition's Events before it writes the status, under
names derived from what they react to (`event_name`), so posting one again
after a crash gets 409, taken as done. A post that fails because the API
server or etcd is unavailable (5xx, 429, or no answer at all) fails the
reconcile before its status write, and the retry posts the transition's
Events again under the same names (a `ReconciliationFailed` Event gets a new
name each time: every failure is reported). Other refusals (4xx) are logged
and that Event dropped, as client-go's recorder does: one bad Event must not
hold the runtime up for ever.
"""

import hashlib
import logging
import secrets
from datetime import datetime
from typing import Any

from trussium_operator.common import constants as c
from trussium_operator.common.events import EventDecision
from trussium_operator.controller.machinery.kube import EVENTS, ApiError, Kube, describe, micro_time

log = logging.getLogger("controller.events")


def event_name(runtime: dict[str, Any], decision: EventDecision, now: datetime) -> str:
    """`<runtime>.<suffix>`, a valid name (events.k8s.io rejects a generateName
    ending in a dot, so names are explicit, as client-go's are).

    A transition's event is named after what it reacts to: the runtime's uid,
    the resourceVersion read and the reason. The reconciler posts it before
    writing the status, so a controller killed in between posts the very
    same name after restart, gets 409, and the event is neither lost nor
    duplicated. A reconcile failure is reported each time it happens, so its
    name is unique (time and randomness).
    """
    meta = runtime["metadata"]
    if decision.reason == c.EventReason.RECONCILIATION_FAILED:
        suffix = f"{int(now.timestamp() * 1_000_000_000):x}{secrets.token_hex(3)}"
    else:
        key = f"{meta.get('uid', '')}/{meta.get('resourceVersion', '')}/{decision.reason}"
        suffix = hashlib.sha256(key.encode()).hexdigest()[:20]
    return f"{meta['name']}.{suffix}"


def event_body(
    runtime: dict[str, Any], decision: EventDecision, *, instance: str, now: datetime
) -> dict[str, Any]:
    meta = runtime["metadata"]
    return {
        "apiVersion": EVENTS.api_version,
        "kind": "Event",
        "metadata": {
            "name": event_name(runtime, decision, now),
            "namespace": meta["namespace"],
        },
        "regarding": {
            "apiVersion": c.API_VERSION,
            "kind": c.KIND,
            "name": meta["name"],
            "namespace": meta["namespace"],
            "uid": meta.get("uid", ""),
            "resourceVersion": meta.get("resourceVersion", ""),
        },
        "eventTime": micro_time(now),
        "reportingController": c.REPORTING_CONTROLLER,
        "reportingInstance": instance,
        "action": decision.action,
        "reason": decision.reason,
        "type": decision.type,
        "note": decision.note,
    }


class Recorder:
    def __init__(self, kube: Kube, instance: str) -> None:
        self.kube = kube
        self.instance = instance

    async def record(self, runtime: dict[str, Any], decision: EventDecision, now: datetime) -> None:
        body = event_body(runtime, decision, instance=self.instance, now=now)
        try:
            await self.kube.request(
                "POST", EVENTS.path(runtime["metadata"]["namespace"]), body=body
            )
        except ApiError as error:
            if error.conflict:
                return  # posted before a restart: this transition is already reported
            if error.status == 429 or error.status >= 500:
                # The API server or etcd is struggling: fail the reconcile before its
                # status write, so the retry posts this Event (same name) instead of losing it.
                raise
            log.warning(
                "cannot post event",
                extra={"fields": {"reason": decision.reason, "error": describe(error)}},
            )
