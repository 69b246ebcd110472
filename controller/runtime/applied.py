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
import sys
from typing import Any

import orjson

from trussium_operator.controller.machinery.cache import Obj, strip_bookkeeping
from trussium_operator.controller.machinery.names import NamespacedName

# An applied object: its kind and its key, which is its runtime's (they share a name).
Key = tuple[str, NamespacedName]


def _key(obj: Obj) -> Key:
    """Interned, so the key shares its strings with the cached objects."""
    meta = obj["metadata"]
    name = NamespacedName(sys.intern(meta.get("namespace", "")), sys.intern(meta["name"]))
    return sys.intern(obj["kind"]), name


# Where a cached object keeps `fields_digest` in place of the fields
# (controller/runtime/compact.py); no Kubernetes field has a slash in its name.
FIELDS_DIGEST = "trussium.io/fields-digest"
_NOT_FIELDS = ("apiVersion", "kind", "metadata", "status", FIELDS_DIGEST)


def _digest(value: Any) -> str:
    return hashlib.blake2b(
        orjson.dumps(value, option=orjson.OPT_SORT_KEYS), digest_size=16
    ).hexdigest()


def fields_digest(obj: Obj) -> str:
    """A digest of the object's own fields (spec, data, ...): neither metadata nor status."""
    return _digest({k: v for k, v in obj.items() if k not in _NOT_FIELDS})


def live_fingerprint(live: Obj, rendered: Obj) -> str:
    """What an apply of `rendered` could change on `live`: its fields, not status."""
    meta, ours = strip_bookkeeping(live)["metadata"], rendered["metadata"]
    kept = {
        field: {k: v for k, v in (meta.get(field) or {}).items() if k in ours.get(field, {})}
        for field in ("labels", "annotations")
    }
    kept["ownerReferences"] = meta.get("ownerReferences")
    fields = live.get(FIELDS_DIGEST) or fields_digest(live)
    return _digest([kept, fields])


def _state(rendered: Obj, live: Obj) -> str:
    return _digest([rendered, live_fingerprint(live, rendered)])


class AppliedObjects:
    def __init__(self) -> None:
        self._applied: dict[Key, str] = {}

    def unchanged(self, rendered: Obj, live: Obj | None) -> bool:
        seen = self._applied.get(_key(rendered))
        return live is not None and seen is not None and seen == _state(rendered, live)

    def record(self, rendered: Obj, answer: Obj) -> None:
        self._applied[_key(rendered)] = _state(rendered, answer)

    def forget(self, runtime: NamespacedName) -> None:
        """Drop what was remembered for a runtime's objects (they share its name)."""
        for key in [k for k in self._applied if k[1] == runtime]:
            del self._applied[key]
