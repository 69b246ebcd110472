"""The managed-Deployment guard: only the operator changes what the operator owns.

A hand edit of a managed Deployment's spec would be reverted by the next
reconcile anyway; refusing it at admission tells the user at once, and says
which TrussiumRuntime field to change instead. Operations that Kubernetes
users expect to keep (rollout restart, pause, their own metadata) stay allowed.

Decisions:
- only an object that already carries the managed-by label is guarded:
  adding the label to one's own Deployment takes nothing from the operator;
- a direct `spec.replicas` edit is refused like any other spec change: the
  replica count comes from the TrussiumRuntime, and autoscalers and
  `kubectl scale` use the scale subresource, which is not intercepted;
- ownerReferences and other metadata stay editable so that garbage
  collection (orphaning) and users' own annotations keep working.
"""

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from itertools import islice
from typing import Any

from trussium_operator.common.constants import (
    KIND,
    LABEL_INSTANCE,
    LABEL_MANAGED_BY,
    MANAGED_BY,
    OPERATOR_LABEL_KEYS,
    RESTARTED_AT_ANNOTATION,
)
from trussium_operator.common.json_limits import cut, path_key

Path = tuple[str | int, ...]

# Changes anyone may make to a managed Deployment's spec.
_ALLOWED_SPEC_PATHS: tuple[Path, ...] = (
    ("spec", "paused"),
    ("spec", "template", "metadata", "annotations", RESTARTED_AT_ANNOTATION),
)

# Deployment field (prefix; -1 matches any list index) -> where to change it instead.
_TRUSSIUM_RUNTIME_FIELDS: tuple[tuple[Path, str], ...] = (
    (("spec", "replicas"), "spec.replicas (spec.autoscaling when autoscaling is enabled)"),
    (("spec", "template", "metadata", "labels"), "spec.podMetadata.labels"),
    (("spec", "template", "metadata", "annotations"), "spec.podMetadata.annotations"),
    (("spec", "template", "spec", "containers", -1, "image"), "spec.image"),
    (("spec", "template", "spec", "containers", -1, "imagePullPolicy"), "spec.image.pullPolicy"),
    (("spec", "template", "spec", "containers", -1, "resources"), "spec.resources"),
    (("spec", "template", "spec", "containers", -1, "env"), "spec.provider"),
    (("spec", "template", "spec", "containers", -1, "envFrom"), "spec.provider / spec.runtime"),
    (("spec", "template", "spec", "containers"), "spec.image / spec.resources"),
    (("spec", "template", "spec", "imagePullSecrets"), "spec.imagePullSecrets"),
    (("spec", "template", "spec", "volumes"), "spec.scratch.sizeLimit"),
    (("spec", "template", "spec", "nodeSelector"), "spec.scheduling.nodeSelector"),
    (("spec", "template", "spec", "tolerations"), "spec.scheduling.tolerations"),
    (("spec", "template", "spec", "affinity"), "spec.scheduling.affinity"),
    (
        ("spec", "template", "spec", "terminationGracePeriodSeconds"),
        "spec.runtime.shutdownDrainTimeoutSeconds",
    ),
)

_MAX_LISTED_FIELDS = 5
_MAX_COUNTED_FIELDS = 1000


@dataclass(frozen=True)
class GuardVerdict:
    allowed: bool
    message: str = ""


def review_managed_deployment_update(
    old: Mapping[str, Any],
    new: Mapping[str, Any],
    username: str,
    operator_username: str,
) -> GuardVerdict:
    """Decide an UPDATE of a Deployment labelled as managed by the operator."""
    if username == operator_username or _labels(old).get(LABEL_MANAGED_BY) != MANAGED_BY:
        return GuardVerdict(allowed=True)
    owner = _owner(old)
    changed_labels = [
        key for key in OPERATOR_LABEL_KEYS if _labels(old).get(key) != _labels(new).get(key)
    ]
    if changed_labels:
        keys = ", ".join(changed_labels)
        return GuardVerdict(
            allowed=False,
            message=(
                f"metadata.labels[{keys}] identify this Deployment as managed by {owner} "
                "and cannot be changed or removed; delete or edit the TrussiumRuntime instead"
            ),
        )
    differences = (
        path
        for path in _diff(("spec",), old.get("spec"), new.get("spec"))
        if not any(path[: len(allowed)] == allowed for allowed in _ALLOWED_SPEC_PATHS)
    )
    # Paths are distinct, and so is the advice for each; counting stops at a bound.
    changed = list(islice(differences, _MAX_COUNTED_FIELDS + 1))
    if not changed:
        return GuardVerdict(allowed=True)
    counted = min(len(changed), _MAX_COUNTED_FIELDS)
    more = counted - _MAX_LISTED_FIELDS
    listed = "; ".join(_advice(path) for path in changed[:_MAX_LISTED_FIELDS])
    if more > 0:
        listed += f"; and {more}{'+' if len(changed) > counted else ''} more"
    return GuardVerdict(
        allowed=False,
        message=(
            f"this Deployment is managed by {owner}; edit the TrussiumRuntime instead: {listed} "
            "(allowed on the Deployment: kubectl rollout restart, rollout pause/resume, scale, "
            "and metadata other than the operator labels)"
        ),
    )


def _advice(path: Path) -> str:
    field = _format(path)
    for prefix, runtime_field in _TRUSSIUM_RUNTIME_FIELDS:
        if _matches(path, prefix):
            return f"{field} comes from its {runtime_field}"
    return f"{field} is fixed by the operator"


def _matches(path: Path, prefix: Path) -> bool:
    if len(path) < len(prefix):
        return False
    return all(
        want == got or (want == -1 and isinstance(got, int))
        for want, got in zip(prefix, path, strict=False)
    )


def _diff(path: Path, old: object, new: object) -> Iterator[Path]:
    """Paths where two JSON values differ (absent = empty object); equal-length lists by item."""
    if old == new:
        return
    if isinstance(old, Mapping | None) and isinstance(new, Mapping | None):
        old_map, new_map = _mapping(old), _mapping(new)
        for key in sorted(set(old_map) | set(new_map)):
            yield from _diff((*path, key), old_map.get(key), new_map.get(key))
    elif isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        for index, (old_item, new_item) in enumerate(zip(old, new, strict=True)):
            yield from _diff((*path, index), old_item, new_item)
    else:
        yield path


def _format(path: Path) -> str:
    text = ""
    for segment in path:
        if isinstance(segment, int):
            text += f"[{segment}]"
        elif "/" in segment or "." in segment or segment != cut(segment):
            text += path_key(segment)
        else:
            text += f".{segment}" if text else segment
    return text


def _owner(deployment: Mapping[str, Any]) -> str:
    """The owning TrussiumRuntime: the controller ownerReference, else the instance label."""
    metadata = _mapping(deployment.get("metadata"))
    namespace = cut(metadata.get("namespace", ""))
    references = metadata.get("ownerReferences")
    for reference in references if isinstance(references, list) else ():
        if (
            isinstance(reference, Mapping)
            and reference.get("controller")
            and reference.get("kind") == KIND
        ):
            return f"{KIND} {namespace}/{cut(reference.get('name', ''))}"
    instance = _labels(deployment).get(LABEL_INSTANCE)
    return f"{KIND} {namespace}/{cut(instance)}" if instance else f"a {KIND}"


def _labels(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return _mapping(_mapping(obj.get("metadata")).get("labels"))


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}
