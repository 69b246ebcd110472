"""Skipping server-side applies that cannot change anything.

An apply whose rendered object equals the last one applied, to an object
nobody has touched since, is a no-op; skipping it keeps a rollout's many
Deployment status updates from turning into PATCH storms. "Touched" means
a label or annotation the operator sets, the owner references, or any
top-level field other than metadata and status differ from what the server
answered to our apply. Labels and annotations others add (such as the
Deployment controller's revision) are not ours, and apply would keep them.
"""

import hashlib
import json
from typing import Any

from controller.cache import Obj, strip_bookkeeping

Key = tuple[str, str, str]


def _key(obj: Obj) -> Key:
    meta = obj["metadata"]
    return obj["kind"], meta.get("namespace", ""), meta["name"]


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


def live_fingerprint(live: Obj, rendered: Obj) -> str:
    """What an apply of `rendered` could change on `live`: its fields, not status."""
    meta, ours = strip_bookkeeping(live)["metadata"], rendered["metadata"]
    kept = {
        field: {k: v for k, v in (meta.get(field) or {}).items() if k in ours.get(field, {})}
        for field in ("labels", "annotations")
    }
    kept["ownerReferences"] = meta.get("ownerReferences")
    rest = {k: v for k, v in live.items() if k not in ("metadata", "status")}
    return _digest([kept, rest])


class AppliedObjects:
    def __init__(self) -> None:
        self._applied: dict[Key, tuple[str, str]] = {}

    def unchanged(self, rendered: Obj, live: Obj | None) -> bool:
        seen = self._applied.get(_key(rendered))
        return (
            live is not None
            and seen is not None
            and seen == (_digest(rendered), live_fingerprint(live, rendered))
        )

    def record(self, rendered: Obj, answer: Obj) -> None:
        self._applied[_key(rendered)] = (_digest(rendered), live_fingerprint(answer, rendered))

    def forget(self, namespace: str, name: str) -> None:
        """Drop what was remembered for a runtime's objects (they share its name)."""
        for key in [k for k in self._applied if k[1:] == (namespace, name)]:
            del self._applied[key]
