"""Finding what other writers added under a field the operator owns whole, so it can be removed.

Server-side apply with force restores every field the operator sets, but a
field the operator never sets (a sidecar container, a volume, an extra env
var, a pod securityContext field) stays, owned by whoever added it. The
operator's contract is the whole pod template, so after each apply the
managedFields tell exactly which template fields belong to other managers
and not to us; those are removed with a JSON patch in which a `test` op on
each value precedes its removal, so a concurrent change fails the patch
instead of losing something unseen. Server defaults are owned by nobody and stay. The
`kubectl.kubernetes.io/restartedAt` annotation is the one foreign field
kept, so `kubectl rollout restart` keeps working. See ADR 0002.

A Service's ports are the other such root. The port list is keyed by port
and protocol, so a port whose number was edited by hand becomes another
manager's entry, and the operator's apply, which adds its own port back
under the same name, is refused (422). `service_ports_restoration` then
swaps the ports others own for the rendered ones in one guarded patch; the
reconciler calls it only on that refusal.
"""

import json
from typing import Any

from trussium_operator.common import constants as c
from trussium_operator.common.defaulting import json_pointer

Fields = dict[str, Any]
Token = str | int
RESTARTED_AT_FIELD = f"f:{c.RESTARTED_AT_ANNOTATION}"
POD_TEMPLATE = ("spec", "template")
SERVICE_PORTS = ("spec", "ports")


def foreign_removals(
    obj: dict[str, Any], manager: str, root: tuple[str, ...]
) -> list[dict[str, Any]]:
    """JSON patch ops removing fields under `root` set by managers other than `manager`.

    Empty when there is nothing foreign. Test ops precede the removals, so
    the patch fails rather than remove something it did not see.
    """
    meta = obj.get("metadata", {})
    live: Any = obj
    for part in root:
        live = live.get(part, {}) if isinstance(live, dict) else {}
    ours: Fields = {}
    found: dict[tuple[Token, ...], Any] = {}
    for entry in meta.get("managedFields") or ():
        if entry.get("manager") == manager and entry.get("operation") == "Apply":
            ours = _merge(ours, _fields_under(entry, root))
    for entry in meta.get("managedFields") or ():
        if entry.get("manager") != manager and not entry.get("subresource"):
            _collect(_fields_under(entry, root), ours, live, root, found)
    ordered = sorted(found, key=_sort_key, reverse=True)
    tests = [{"op": "test", "path": json_pointer(p), "value": found[p]} for p in ordered]
    return tests + [{"op": "remove", "path": json_pointer(p)} for p in ordered]


def _fields_under(entry: dict[str, Any], root: tuple[str, ...]) -> Fields:
    fields: Fields = entry.get("fieldsV1") or {}
    for part in root:
        fields = fields.get(f"f:{part}", {})
    return dict(fields)


def _merge(a: Fields, b: Fields) -> Fields:
    merged = dict(a)
    for key, child in b.items():
        merged[key] = _merge(merged.get(key, {}), child) if isinstance(child, dict) else child
    return merged


def _collect(
    foreign: Fields,
    ours: Fields | None,
    live: Any,
    path: tuple[Token, ...],
    out: dict[tuple[Token, ...], Any],
) -> None:
    for key, child in foreign.items():
        if key == "." or (path[-2:] == ("metadata", "annotations") and key == RESTARTED_AT_FIELD):
            continue
        found = _resolve(live, key)
        if found is None:
            continue  # already gone
        token, value = found
        our_child = None if ours is None else ours.get(key)
        if our_child is None:
            out[(*path, token)] = value
        elif isinstance(child, dict):
            _collect(child, our_child, value, (*path, token), out)


def _resolve(live: Any, key: str) -> tuple[Token, Any] | None:
    """The live value a fieldsV1 key names, with its JSON-pointer token."""
    kind, _, raw = key.partition(":")
    if kind == "f" and isinstance(live, dict) and raw in live:
        return raw, live[raw]
    if kind in ("k", "v", "i") and isinstance(live, list):
        wanted = json.loads(raw)
        for index, item in enumerate(live):
            if (
                (kind == "k" and isinstance(item, dict) and _matches(item, wanted))
                or (kind == "v" and item == wanted)
                or (kind == "i" and index == wanted)
            ):
                return index, item
    return None


def _matches(item: dict[str, Any], keys: dict[str, Any]) -> bool:
    return all(item.get(name) == value for name, value in keys.items())


def _sort_key(path: tuple[Token, ...]) -> tuple[tuple[int, Token], ...]:
    """Later list indices first, so removing one never shifts another still to remove."""
    return tuple((1, t) if isinstance(t, int) else (0, t) for t in path)


def service_ports_restoration(
    service: dict[str, Any], manager: str, ports: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """One JSON patch that removes the ports others own and adds back the rendered
    ports it would leave missing (a Service cannot be left without ports)."""
    ops = foreign_removals(service, manager, SERVICE_PORTS)
    if not ops:
        return []
    removed = {op["path"] for op in ops if op["op"] == "remove"}
    live = service.get("spec", {}).get("ports") or []
    kept = {
        (port.get("port"), port.get("protocol", "TCP"))
        for index, port in enumerate(live)
        if f"/spec/ports/{index}" not in removed
    }
    adds = [
        {"op": "add", "path": "/spec/ports/-", "value": port}
        for port in ports
        if (port["port"], port.get("protocol", "TCP")) not in kept
    ]
    return ops + adds
