"""Taking over the fields legacy Update managers own, the way client-go's csaupgrade does.

The Go operator writes every managed object with plain Update calls under
the field manager `manager`. As long as such an entry co-owns a field,
server-side apply never removes it, so a value the operator stops setting
(a base URL, a pull secret) would stay forever. Moving the legacy entries
into the operator's own Apply entry (a union of the field sets) makes the
operator the only owner of what the legacy writer set; its next apply then
prunes whatever it no longer renders. Entries of every other manager (the
HPA's scale writes, `kubectl rollout restart`, other controllers) and of
subresources are left exactly as they are. See ADR 0008.
"""

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

Entry = Mapping[str, Any]
Fields = dict[str, Any]

UPDATE = "Update"
APPLY = "Apply"
# The Go operator's field manager: controller-runtime names it after the binary.
GO_OPERATOR_MANAGER = "manager"


def is_legacy_entry(entry: Entry, legacy: Iterable[str]) -> bool:
    """An Update entry of a legacy manager on the object itself (not a subresource)."""
    return (
        entry.get("manager") in set(legacy)
        and entry.get("operation") == UPDATE
        and not entry.get("subresource")
    )


def has_legacy_entries(entries: Sequence[Entry] | None, legacy: Iterable[str]) -> bool:
    names = set(legacy)
    return any(is_legacy_entry(entry, names) for entry in entries or ())


def merge_fields(a: Mapping[str, Any], b: Mapping[str, Any]) -> Fields:
    """The union of two fieldsV1 sets (nested dicts whose leaves are `{}`)."""
    merged = dict(a)
    for key, child in b.items():
        mine = merged.get(key)
        if isinstance(child, Mapping) and isinstance(mine, Mapping):
            merged[key] = merge_fields(mine, child)
        elif isinstance(child, Mapping):
            merged[key] = merge_fields({}, child)
        else:
            merged[key] = child
    return merged


def _is_ours(entry: Entry, manager: str) -> bool:
    return (
        entry.get("manager") == manager
        and entry.get("operation") == APPLY
        and not entry.get("subresource")
    )


def take_over(
    entries: Sequence[Entry] | None, legacy: Iterable[str], manager: str
) -> list[dict[str, Any]] | None:
    """The managedFields after moving every legacy entry into `manager`'s Apply entry.

    None when there is nothing to move. When `manager` has no Apply entry
    yet, the first legacy entry becomes it (keeping its apiVersion and
    time), as csaupgrade does. Order and content of all other entries are
    kept, so the result differs from the input only where it must.
    """
    names = set(legacy) - {manager}
    current = [dict(entry) for entry in entries or ()]
    moving = [entry for entry in current if is_legacy_entry(entry, names)]
    if not moving:
        return None
    target = next((entry for entry in current if _is_ours(entry, manager)), None)
    if target is None:
        target = moving[0]
        target.update(manager=manager, operation=APPLY)
        moving = moving[1:]
    fields: Fields = dict(target.get("fieldsV1") or {})
    for entry in moving:
        fields = merge_fields(fields, entry.get("fieldsV1") or {})
    target["fieldsType"] = "FieldsV1"
    target["fieldsV1"] = fields
    return [entry for entry in current if not any(entry is gone for gone in moving)]
