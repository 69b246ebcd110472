"""The cache forms: of each watched object, only what the controller reads.

Thousands of cached objects repeat the same strings (field names, label
keys, images, condition messages), and a managed object's spec is mostly
fields nobody reads back. So the caches keep:

- a TrussiumRuntime whole (validation and rendering read all of it), less
  managedFields and kubectl's last-applied copy;
- a managed object's metadata (with its field managers summarised, for the
  takeover), the few fields status and rendering read (a Deployment's
  status, replica count and container images, a Service's port names and
  numbers), and a digest of every other field, which is all the
  applied-fingerprint needs (`controller/runtime/applied.py`);

with every string interned, so one copy serves all objects (an interned
string is freed with its last user).

The reads are the `*_reads` functions below, named in their kinds' registry
entries (`controller/runtime/kinds.py`); they keep what `common.status`,
`common.lifecycle` and `common.render` read;
tests/pure/test_controller_compact.py holds status, rendering and the
fingerprint equal on full and cached forms.
"""

import sys
from collections.abc import Callable
from typing import Any, cast

from trussium_operator.controller.machinery.cache import Obj, identity_only, strip_bookkeeping
from trussium_operator.controller.migration.takeover import managers_kept
from trussium_operator.controller.runtime.applied import FIELDS_DIGEST, fields_digest

_METADATA = (
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "labels",
    "annotations",
    "ownerReferences",
    "managedFields",
    "deletionTimestamp",
)
_CONTAINER = ("name", "image")
_PORT = ("name", "port")


def deployment_reads(obj: Obj) -> Obj:
    """status: every condition and count; spec: the replica count (the autoscaler's,
    kept by rendering) and each container's name and image (status.currentImage)."""
    spec = obj.get("spec") or {}
    pod = (spec.get("template") or {}).get("spec") or {}
    containers = [_pick(x, _CONTAINER) for x in pod.get("containers") or () if isinstance(x, dict)]
    kept: Obj = {"template": {"spec": {"containers": containers}}}
    if "replicas" in spec:
        kept["replicas"] = spec["replicas"]
    return {"spec": kept, "status": obj.get("status") or {}}


def service_reads(obj: Obj) -> Obj:
    """spec.ports' names and numbers: status.endpoint."""
    ports = [
        _pick(p, _PORT) for p in (obj.get("spec") or {}).get("ports") or () if isinstance(p, dict)
    ]
    return {"spec": {"ports": ports}}


def _pick(mapping: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    return {k: mapping[k] for k in keys if k in mapping}


def interned(value: Any) -> Any:
    """A copy of a JSON value whose keys and string values are interned."""
    if isinstance(value, dict):
        return {sys.intern(k): interned(v) for k, v in value.items()}
    if isinstance(value, list):
        return [interned(v) for v in value]
    if isinstance(value, str):
        return sys.intern(value)
    return value


def runtime_form(obj: Obj) -> Obj:
    return cast(Obj, interned(strip_bookkeeping(obj)))


def secret_form(obj: Obj) -> Obj:
    return cast(Obj, interned(identity_only(obj)))


def managed_form(reads: Callable[[Obj], Obj] | None = None) -> Callable[[Obj], Obj]:
    """The cache transform for a managed kind that `reads` more than its metadata."""

    def form(obj: Obj) -> Obj:
        meta = managers_kept(obj)["metadata"]
        kept: Obj = {"metadata": _pick(meta, _METADATA), FIELDS_DIGEST: fields_digest(obj)}
        if reads is not None:
            kept |= reads(obj)
        return cast(Obj, interned(kept))

    return form
