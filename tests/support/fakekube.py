"""An in-memory API server behind the controller's `Kube` interface, for in-process tests.

It models what the controller's correctness rests on: one global
resourceVersion; metadata.generation bumped by a change outside metadata and
status; 409 for a stale resourceVersion (PUT, status PUT, apply, DELETE
preconditions) and for a name taken; 422 for a JSON patch whose `test` fails
(the real API server's answer); server-side apply that replaces the applier's
fields, prunes the ones it dropped and keeps everyone else's, with managedFields
per manager, operation and subresource; the status subresource; label
selectors, metadata-only answers and pages on lists; watches from a version,
with bookmarks, and 410 Gone once history is compacted. Not modelled:
defaulting, validation, admission, finalizers, garbage collection.

Tests write through the same code (`apply`, `create`, `edit`, `set_status`),
unrecorded and never failed; only the controller's calls go through `fail`
(the next N matching calls raise an error) and `hold` (a matching call waits
for the test), and are recorded in `calls`. tests/apiserver/
test_fakekube_differential.py sends the same requests to kube-apiserver.
"""

import asyncio
import copy
import json
import uuid
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, NamedTuple

from tests.support.json_patch import PatchError, apply_json_patch
from trussium_operator.common import constants as c
from trussium_operator.controller.machinery.kube import (
    APPLY_PATCH,
    EVENTS,
    JSON,
    JSON_PATCH,
    LEASES,
    SECRETS,
    ApiError,
    Kube,
    KubeError,
)
from trussium_operator.controller.runtime.kinds import OWNED, RUNTIMES

Obj = dict[str, Any]
FieldPath = tuple[str, ...]  # fieldsV1 keys from the root: "f:spec", 'k:{"name":"x"}', "."
MERGE_PATCH = "application/merge-patch+json"
RESOURCES = {r.kind: r for r in (RUNTIMES, SECRETS, EVENTS, LEASES, *OWNED.values())}
# The merge keys of the lists the operator's objects hold; any other list is atomic.
_MERGE_KEYS = (("uid",), ("containerPort", "protocol"), ("port", "protocol"), ("name",), ("type",))
_OWNABLE_METADATA = ("labels", "annotations", "ownerReferences", "finalizers")


@dataclass(frozen=True)
class Call:
    """One request the controller made."""

    method: str
    path: str
    query: dict[str, Any]
    body: Any = None
    content_type: str = JSON
    accept: str = JSON

    @property
    def write(self) -> bool:
        return self.method in ("POST", "PUT", "PATCH", "DELETE")

    def __str__(self) -> str:
        return f"{self.method} {self.path}"


Matcher = Callable[[Call], bool]


@dataclass
class Fault:
    matches: Matcher
    error: KubeError
    times: int
    hits: int = 0

    def stop(self) -> None:
        self.times = self.hits


@dataclass
class Hold:
    """A matching call waits here: `arrived` is set when it does, `release()` lets it go on."""

    matches: Matcher
    arrived: asyncio.Event = field(default_factory=asyncio.Event)
    released: asyncio.Event = field(default_factory=asyncio.Event)

    def release(self) -> None:
        self.released.set()


class Where(NamedTuple):
    """A request path taken apart."""

    prefix: str  # /api/v1 or /apis/<group>/<version>
    plural: str
    namespace: str | None
    name: str | None
    subresource: str | None

    @property
    def collection(self) -> tuple[str, str]:
        return self.prefix, self.plural


def parse(path: str) -> Where:
    parts = path.strip("/").split("/")
    split = 2 if parts[0] == "api" else 3
    prefix, rest = "/" + "/".join(parts[:split]), parts[split:]
    namespace = None
    if len(rest) >= 3 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
    name = rest[1] if len(rest) > 1 else None
    return Where(prefix, rest[0], namespace, name, rest[2] if len(rest) > 2 else None)


def matches_selector(obj: Obj, selector: str | None) -> bool:
    """Equality-based label selectors: `a=b`, `a==b`, `a!=b`, `a`, `!a`, comma-joined."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    for term in filter(None, (selector or "").split(",")):
        if "!=" in term:
            key, value = term.split("!=", 1)
            ok = labels.get(key.strip()) != value.strip()
        elif "=" in term:
            key, value = term.replace("==", "=").split("=", 1)
            ok = labels.get(key.strip()) == value.strip()
        else:
            ok = (term.strip().lstrip("!") in labels) != term.strip().startswith("!")
        if not ok:
            return False
    return True


def matches_fields(obj: Obj, selector: str | None) -> bool:
    """The field selectors every kind supports: `metadata.name=x`, `metadata.namespace=x`."""
    meta = obj.get("metadata") or {}
    for term in filter(None, (selector or "").split(",")):
        field, value = term.replace("==", "=").split("=", 1)
        if str(meta.get(field.removeprefix("metadata."))) != value:
            return False
    return True


class FakeKube(Kube):
    def __init__(self, manager: str = c.FIELD_MANAGER) -> None:  # no API client behind it
        self.manager = manager  # the field manager of calls that name none
        self.calls: list[Call] = []
        self.version = 0
        self.compacted = 0  # watches from before this version get 410 Gone
        self._objects: dict[tuple[str, str, str, str], Obj] = {}
        self._history: list[tuple[int, Where, str, Obj | None, Obj]] = []
        self._watches: list[tuple[Call, asyncio.Queue[Obj | None]]] = []
        self._pages: dict[str, tuple[str, list[Obj]]] = {}
        self._faults: list[Fault] = []
        self._holds: list[Hold] = []

    # --- what tests use -------------------------------------------------------

    def fail(self, matches: Matcher, error: KubeError, times: int = 1) -> Fault:
        fault = Fault(matches, error, times)
        self._faults.append(fault)
        return fault

    def hold(self, matches: Matcher) -> Hold:
        hold = Hold(matches)
        self._holds.append(hold)
        return hold

    def writes(self, since: int = 0) -> list[str]:
        """The controller's writes from call number `since` on."""
        return [str(call) for call in self.calls[since:] if call.write]

    def get(self, kind: str, namespace: str, name: str) -> Obj | None:
        return copy.deepcopy(self._objects.get(_key(parse(RESOURCES[kind].path(namespace, name)))))

    def objects(self, kind: str, namespace: str) -> list[Obj]:
        where = parse(RESOURCES[kind].path(namespace))
        return [copy.deepcopy(obj) for _, obj in self._matching(where)]

    def apply(self, obj: Obj, manager: str = "test") -> Obj:
        """`kubectl apply --server-side --force-conflicts`."""
        query = {"fieldManager": manager, "force": "true"}
        return self._serve(Call("PATCH", _path_of(obj), query, obj, APPLY_PATCH))

    def create(self, obj: Obj, manager: str = "test") -> Obj:
        meta = obj["metadata"]
        path = RESOURCES[obj["kind"]].path(meta.get("namespace"))
        return self._serve(Call("POST", path, {"fieldManager": manager}, obj))

    def edit(self, kind: str, namespace: str, name: str, ops: list[Obj], manager: str) -> Obj:
        """A JSON patch, as `kubectl patch --type=json` sends it."""
        path = RESOURCES[kind].path(namespace, name)
        return self._serve(Call("PATCH", path, {"fieldManager": manager}, ops, JSON_PATCH))

    def set_status(self, kind: str, namespace: str, name: str, status: Obj) -> Obj:
        """What the object's controller (the Deployment controller, say) would write."""
        path = RESOURCES[kind].path(namespace, name) + "/status"
        query = {"fieldManager": "kube-controller-manager"}
        return self._serve(Call("PATCH", path, query, {"status": status}, MERGE_PATCH))

    def end_watches(self) -> None:
        """End every open watch with a last bookmark, as the API server's timeout does."""
        self.bookmark()
        for _, queue in self._watches:
            queue.put_nowait(None)

    def bookmark(self) -> None:
        for call, queue in self._watches:
            if call.query.get("allowWatchBookmarks") == "true":
                mark = {"metadata": {"resourceVersion": str(self.version)}}
                queue.put_nowait({"type": "BOOKMARK", "object": mark})

    def compact(self) -> None:
        """Forget the history so far (etcd compaction): older watches get 410."""
        self.compacted = self.version
        self._history.clear()

    # --- the Kube interface ---------------------------------------------------

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: dict[str, Any] | None = None,
        body: Any = None,
        content_type: str = JSON,
        accept: str = JSON,
    ) -> dict[str, Any]:
        call = Call(method, path, dict(query or {}), copy.deepcopy(body), content_type, accept)
        await self._intercept(call)
        return self._serve(call)

    async def watch(
        self,
        path: str,
        query: dict[str, Any],
        accept: str = JSON,
        opened: Callable[[], None] = lambda: None,
    ) -> AsyncIterator[dict[str, Any]]:
        call = Call("GET", path, query | {"watch": "true"}, accept=accept)
        await self._intercept(call)
        since = int(query.get("resourceVersion") or 0)
        if since and since < self.compacted:
            opened()
            yield {"type": "ERROR", "object": _status(410, "Expired", "too old resource version")}
            return
        if since:
            changes = [change[1:] for change in self._history if change[0] > since]
        else:  # from "now": what exists, as additions
            changes = [(w, "ADDED", None, obj) for w, obj in self._matching(parse(path))]
        backlog = [_event(call, *change) for change in changes]
        queue: asyncio.Queue[Obj | None] = asyncio.Queue()
        watch = (call, queue)
        self._watches.append(watch)
        try:
            opened()
            for event in filter(None, backlog):
                yield event
            while (live := await queue.get()) is not None:
                yield live
        finally:
            self._watches.remove(watch)

    async def _intercept(self, call: Call) -> None:
        self.calls.append(call)
        for hold in [h for h in self._holds if h.matches(call)]:
            self._holds.remove(hold)
            hold.arrived.set()
            await hold.released.wait()
        for fault in self._faults:
            if fault.hits < fault.times and fault.matches(call):
                fault.hits += 1
                raise fault.error

    # --- serving --------------------------------------------------------------

    def _serve(self, call: Call) -> Obj:
        where = parse(call.path)
        manager = str(call.query.get("fieldManager") or self.manager)
        if where.name is None:
            if call.method == "GET":
                return self._list(where, call)
            if call.method == "POST":
                return self._create(where, call.body, manager)
        else:
            old = self._objects.get(_key(where))
            if call.method == "PATCH" and call.content_type == APPLY_PATCH:
                force = call.query.get("force") == "true"
                return self._apply(where, old, call.body, manager, force=force)
            if old is None:
                raise ApiError(404, "NotFound", f'{where.plural} "{where.name}" not found')
            if call.method == "GET":
                return copy.deepcopy(old)
            if call.method == "DELETE":
                return self._delete(where, old, call.body or {})
            if call.method == "PUT":
                _check_version(where, old, call.body)
                return self._commit(where, old, call.body, manager)
            if call.method == "PATCH":
                return self._commit(where, old, _patched(old, call), manager)
        raise ApiError(405, "MethodNotAllowed", f"{call.method} {call.path}")

    def _matching(self, where: Where, selector: str | None = None) -> list[tuple[Where, Obj]]:
        return [
            (Where(prefix, plural, namespace or None, name, None), obj)
            for (prefix, plural, namespace, name), obj in sorted(self._objects.items())
            if (prefix, plural) == where.collection
            and where.namespace in (None, namespace)
            and matches_selector(obj, selector)
        ]

    def _list(self, where: Where, call: Call) -> Obj:
        token = call.query.get("continue")
        if token:
            if token not in self._pages:
                raise ApiError(410, "Expired", "the continue token has expired")
            version, items = self._pages.pop(token)
        else:
            version = str(self.version)
            items = [
                obj
                for _, obj in self._matching(where, call.query.get("labelSelector"))
                if matches_fields(obj, call.query.get("fieldSelector"))
            ]
        limit = int(call.query.get("limit") or 0) or len(items)
        meta: Obj = {"resourceVersion": version}
        if items[limit:]:
            meta["continue"] = token = f"{version}.{uuid.uuid4().hex}"
            self._pages[token] = (version, items[limit:])
        if "PartialObjectMetadata" in call.accept:
            shown = [_metadata_only(obj) for obj in items[:limit]]
            return {"kind": "PartialObjectMetadataList", "metadata": meta, "items": shown}
        # Built-in lists leave out each item's kind and apiVersion; custom resources keep them.
        custom = c.GROUP in where.prefix
        shown = [obj if custom else _without_type(obj) for obj in items[:limit]]
        return {"kind": "List", "metadata": meta, "items": copy.deepcopy(shown)}

    def _create(self, where: Where, body: Obj, manager: str) -> Obj:
        name = body["metadata"]["name"]
        if _key(where._replace(name=name)) in self._objects:
            raise ApiError(409, "AlreadyExists", f'{where.plural} "{name}" already exists')
        return self._commit(where._replace(name=name), None, body, manager)

    def _delete(self, where: Where, old: Obj, options: Obj) -> Obj:
        meta = old["metadata"]
        for field_name, wanted in (options.get("preconditions") or {}).items():
            if wanted != meta.get(field_name):
                message = f"the {field_name} in the precondition does not match"
                raise ApiError(409, "Conflict", message)
        del self._objects[_key(where)]
        gone = copy.deepcopy(old)
        gone["metadata"]["resourceVersion"] = self._next_version()
        self._record(where, "DELETED", old, gone)
        return gone

    def _apply(self, where: Where, old: Obj | None, body: Obj, manager: str, force: bool) -> Obj:
        """Server-side apply: the applier's previous fields that it no longer sets and
        nobody else owns go, its new ones are merged in; a field another manager set
        to a different value is taken over with `force`, else 409."""
        _check_version(where, old, body)
        entries = _entries(old)
        applied = _fieldset(body)
        mine, others = set[FieldPath](), set[FieldPath]()
        for entry in entries:
            if not entry.get("subresource"):
                fields = _paths(entry.get("fieldsV1") or {})
                ours = (entry["manager"], entry["operation"]) == (manager, "Apply")
                mine, others = (mine | fields, others) if ours else (mine, others | fields)
        new = copy.deepcopy(old or {})
        for path in sorted(mine - applied - others, key=len, reverse=True):
            _remove(new, path)
        new = _merge(new, body)
        taken = {p for p in applied & others if _value(old, p) != _value(new, p)}
        if taken and not force:
            raise ApiError(409, "Conflict", f"Apply failed with {len(taken)} conflicts")
        kept = [e for e in entries if (e["manager"], e["operation"]) != (manager, "Apply")]
        kept = [_owning(e, _paths(e.get("fieldsV1") or {}) - taken) for e in kept]
        mine_entry = _owning(_entry(manager, "Apply", body.get("apiVersion", "")), applied)
        new["metadata"]["managedFields"] = [e for e in [mine_entry, *kept] if e["fieldsV1"]]
        return self._commit(where, old, new, manager, track=False)

    def _commit(
        self, where: Where, old: Obj | None, body: Obj, manager: str, *, track: bool = True
    ) -> Obj:
        """Store a write: identity and status kept as the subresource demands, generation
        and resourceVersion moved, managedFields updated for an Update."""
        new = copy.deepcopy(body)
        meta = new.setdefault("metadata", {})
        before = (old or {}).get("metadata") or {}
        if where.subresource == "status":
            new = copy.deepcopy(old or {}) | {"status": new.get("status")}
            meta = new["metadata"]
        elif old is not None and "status" in old:
            new["status"] = copy.deepcopy(old["status"])
        else:
            new.pop("status", None)
        for type_field in ("apiVersion", "kind"):
            if old is not None and type_field in old:
                new.setdefault(type_field, old[type_field])
        meta.update(name=where.name, resourceVersion=self._next_version())
        if where.namespace:
            meta["namespace"] = where.namespace
        meta["uid"] = before.get("uid") or str(uuid.uuid4())
        meta["creationTimestamp"] = before.get("creationTimestamp") or _now()
        if "spec" in new:
            generation = before.get("generation", 0)
            meta["generation"] = generation + (old is None or _spec(old) != _spec(new))
        given = meta.get("managedFields")
        if track and (given is None or given == before.get("managedFields")):
            meta["managedFields"] = _updated(old, new, manager, where.subresource)
        self._objects[_key(where)] = new
        self._record(where, "MODIFIED" if old else "ADDED", old, new)
        return copy.deepcopy(new)

    def _next_version(self) -> str:
        self.version += 1
        return str(self.version)

    def _record(self, where: Where, kind: str, old: Obj | None, new: Obj) -> None:
        self._history.append((self.version, where, kind, copy.deepcopy(old), copy.deepcopy(new)))
        for call, queue in self._watches:
            if (event := _event(call, where, kind, old, new)) is not None:
                queue.put_nowait(event)


def _event(watch: Call, where: Where, kind: str, old: Obj | None, new: Obj) -> Obj | None:
    """What `watch` sees of one change: an object entering or leaving its label
    selector is added or deleted for it; changes elsewhere are invisible."""
    watching = parse(watch.path)
    if where.collection != watching.collection or watching.namespace not in (
        None,
        where.namespace,
    ):
        return None
    selector = watch.query.get("labelSelector")
    was = old is not None and matches_selector(old, selector)
    now = kind != "DELETED" and matches_selector(new, selector)
    if not (was or now):
        return None
    shown = "MODIFIED" if was and now else "ADDED" if now else "DELETED"
    obj = _metadata_only(new) if "PartialObjectMetadata" in watch.accept else copy.deepcopy(new)
    return {"type": shown, "object": obj}


# --- objects and their fields -------------------------------------------------


def _path_of(obj: Obj) -> str:
    meta = obj["metadata"]
    return RESOURCES[obj["kind"]].path(meta.get("namespace"), meta["name"])


def _key(where: Where) -> tuple[str, str, str, str]:
    return where.prefix, where.plural, where.namespace or "", where.name or ""


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _status(code: int, reason: str, message: str) -> Obj:
    return {"kind": "Status", "code": code, "reason": reason, "message": message}


def _spec(obj: Obj) -> Obj:
    return {k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata", "status")}


def _metadata_only(obj: Obj) -> Obj:
    meta = copy.deepcopy(obj.get("metadata") or {})
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": meta}


def _without_type(obj: Obj) -> Obj:
    return {k: v for k, v in obj.items() if k not in ("kind", "apiVersion")}


def _check_version(where: Where, old: Obj | None, body: Obj) -> None:
    sent = ((body or {}).get("metadata") or {}).get("resourceVersion")
    if sent and (old is None or sent != old["metadata"]["resourceVersion"]):
        raise ApiError(
            409,
            "Conflict",
            f'Operation cannot be fulfilled on {where.plural} "{where.name}": '
            "the object has been modified; please apply your changes to the latest version "
            "and try again",
        )


def _patched(old: Obj, call: Call) -> Obj:
    if call.content_type == JSON_PATCH:
        try:
            return dict(apply_json_patch(old, call.body))
        except PatchError as error:
            # The API server says no more than this, whichever op failed.
            message = "the server rejected our request due to an error in our request"
            raise ApiError(422, "Invalid", message) from error
    if call.content_type == MERGE_PATCH:
        return dict(_merge_patch(old, call.body))
    raise ApiError(415, "UnsupportedMediaType", call.content_type)


def _merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    merged = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = _merge_patch(merged.get(key), value)
    return merged


def _list_key(items: list[Any]) -> tuple[str, ...] | None:
    if not items or not all(isinstance(item, dict) for item in items):
        return None
    return next((keys for keys in _MERGE_KEYS if all(keys[0] in i for i in items)), None)


def _token(item: Obj, keys: tuple[str, ...]) -> str:
    wanted = {k: item[k] for k in keys if k in item}
    return "k:" + json.dumps(wanted, sort_keys=True, separators=(",", ":"))


def _leaves(value: Any, path: FieldPath) -> set[FieldPath]:
    """The fieldsV1 paths `value` sets below `path`."""
    if isinstance(value, dict) and value:
        return set[FieldPath]().union(*(_leaves(v, (*path, f"f:{k}")) for k, v in value.items()))
    if isinstance(value, list) and (keys := _list_key(value)):
        tokens = [(*path, _token(item, keys)) for item in value]
        items = zip(tokens, value, strict=True)
        return set[FieldPath]().union(*({(*p, ".")} | _leaves(i, p) for p, i in items))
    return {path}


def _fieldset(obj: Obj | None, subresource: str | None = None) -> set[FieldPath]:
    """The fields a write of `obj` sets: its status for the status subresource, else
    everything but status and the identity and bookkeeping in metadata."""
    if obj is None:
        return set()
    if subresource == "status":
        return _leaves(obj["status"], ("f:status",)) if obj.get("status") else set()
    meta = obj.get("metadata") or {}
    body = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata", "status")}
    if owned := {k: meta[k] for k in _OWNABLE_METADATA if meta.get(k)}:
        body["metadata"] = owned
    return _leaves(body, ()) if body else set()


def _tree(paths: Iterable[FieldPath]) -> Obj:
    tree: Obj = {}
    for path in paths:
        node = tree
        for key in path:
            node = node.setdefault(key, {})
    return tree


def _paths(tree: Obj, prefix: FieldPath = ()) -> set[FieldPath]:
    found: set[FieldPath] = set()
    for key, child in tree.items():
        found |= _paths(child, (*prefix, key)) if child else {(*prefix, key)}
    return found


def _step(node: Any, key: str) -> tuple[Any, str | int] | None:
    """The child a fieldsV1 key names, and its index or member name in `node`."""
    kind, _, raw = key.partition(":")
    if kind == "f" and isinstance(node, dict) and raw in node:
        return node[raw], raw
    if kind == "k" and isinstance(node, list):
        wanted = json.loads(raw)
        for index, item in enumerate(node):
            if isinstance(item, dict) and all(item.get(k) == v for k, v in wanted.items()):
                return item, index
    return None


def _value(obj: Obj | None, path: FieldPath) -> Any:
    node: Any = obj
    for key in path:
        if key == ".":
            break
        found = _step(node, key)
        if found is None:
            return None
        node = found[0]
    return node


def _remove(obj: Obj, path: FieldPath) -> None:
    """Delete what `path` names (a "." path: the list item), then empty parents."""
    path = path[:-1] if path[-1] == "." else path
    trail: list[tuple[Any, str | int]] = []
    node: Any = obj
    for key in path:
        found = _step(node, key)
        if found is None:
            return
        trail.append((node, found[1]))
        node = found[0]
    while trail:
        parent, at = trail.pop()
        del parent[at]
        if parent or not trail:
            return


def _merge(live: Any, applied: Any) -> Any:
    """Applied values over live ones: maps member by member, keyed lists item by item."""
    if isinstance(live, dict) and isinstance(applied, dict):
        merged = dict(live)
        for key, value in applied.items():
            merged[key] = _merge(live.get(key), value)
        return merged
    if isinstance(live, list) and isinstance(applied, list) and (keys := _list_key(applied)):
        merged_items = [copy.deepcopy(i) for i in live]
        for item in applied:
            found = _step(merged_items, _token(item, keys))
            if found is None:
                merged_items.append(copy.deepcopy(item))
            else:
                merged_items[int(found[1])] = _merge(found[0], item)
        return merged_items
    return copy.deepcopy(applied)


def _entries(obj: Obj | None) -> list[Obj]:
    return copy.deepcopy(((obj or {}).get("metadata") or {}).get("managedFields") or [])


def _entry(manager: str, operation: str, api_version: str, subresource: str | None = None) -> Obj:
    entry = {"manager": manager, "operation": operation, "apiVersion": api_version, "time": _now()}
    return entry | ({"subresource": subresource} if subresource else {})


def _owning(entry: Obj, paths: set[FieldPath]) -> Obj:
    return entry | {"fieldsType": "FieldsV1", "fieldsV1": _tree(paths)}


def _updated(old: Obj | None, new: Obj, manager: str, subresource: str | None) -> list[Obj]:
    """managedFields after an Update: the changed fields move to `manager`'s entry,
    fields that are gone leave every entry."""
    before, after = _fieldset(old, subresource), _fieldset(new, subresource)
    changed = {p for p in after if p not in before or _value(old, p) != _value(new, p)}
    gone = before - after
    entries, mine = [], set(changed)
    for entry in _entries(old):
        fields = _paths(entry.get("fieldsV1") or {}) - gone
        ident = (entry["manager"], entry["operation"], entry.get("subresource"))
        if ident == (manager, "Update", subresource):
            mine |= fields
        else:
            entries.append(_owning(entry, fields - changed))
    if mine:
        api_version = new.get("apiVersion", "")
        entries.append(_owning(_entry(manager, "Update", api_version, subresource), mine))
    return [e for e in entries if e["fieldsV1"]]
