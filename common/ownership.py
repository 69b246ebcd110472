"""Whose an object under a managed name is, and so whether the operator may touch it
(docs/contract.md, "Ownership").

The operator writes, adopts or deletes an object only when the runtime
controls it (a controller owner reference with the runtime's uid) or when it
is an orphan carrying the runtime's managed labels for that instance (left
behind by an orphaning delete, or by a controller that lost its reference).
Anything else under the name belongs to someone else: it is a conflict, and
the object is left exactly as it is.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from trussium_operator.common import constants as c


class Claim(Enum):
    ABSENT = "absent"  # nothing under the name: the operator may create it
    CONTROLLED = "controlled"  # the runtime's own
    ORPHANED = "orphaned"  # no controller, the runtime's labels: adopted
    FOREIGN = "foreign"  # someone else's: a conflict

    @property
    def writable(self) -> bool:
        return self is not Claim.FOREIGN


@dataclass(frozen=True)
class Ownership:
    claim: Claim
    # Who controls a foreign object, as a reader names it ("" otherwise).
    holder: str = ""


def _controller(meta: Mapping[str, Any]) -> Mapping[str, Any] | None:
    references = meta.get("ownerReferences") or ()
    return next((r for r in references if isinstance(r, Mapping) and r.get("controller")), None)


def _labelled_for(meta: Mapping[str, Any], name: str) -> bool:
    labels = meta.get("labels") or {}
    return (
        labels.get(c.LABEL_MANAGED_BY) == c.MANAGED_BY
        and labels.get(c.LABEL_NAME) == c.APP_NAME
        and labels.get(c.LABEL_INSTANCE) == name
    )


def ownership(live: Mapping[str, Any] | None, runtime_name: str, runtime_uid: str) -> Ownership:
    """Whose `live` (the object under the runtime's name, or None) is."""
    if live is None:
        return Ownership(Claim.ABSENT)
    meta = live.get("metadata") or {}
    controller = _controller(meta)
    if controller is not None:
        if runtime_uid and controller.get("uid") == runtime_uid:
            return Ownership(Claim.CONTROLLED)
        kind, name = controller.get("kind", "object"), controller.get("name", "")
        same_name = kind == c.KIND and name == runtime_name
        holder = f'{kind} "{name}"' + (" (an earlier runtime of that name)" if same_name else "")
        return Ownership(Claim.FOREIGN, f"it is controlled by {holder}")
    if _labelled_for(meta, runtime_name):
        return Ownership(Claim.ORPHANED)
    return Ownership(Claim.FOREIGN, "it has no controller and is not labelled as this runtime's")


def conflict_message(kind: str, name: str, found: Ownership) -> str:
    """What the runtime's status and Warning event say about one conflict."""
    return (
        f'{kind} "{name}" already exists and is not this runtime\'s: {found.holder}. '
        "The operator leaves it as it is; delete or rename it, or rename the runtime."
    )
