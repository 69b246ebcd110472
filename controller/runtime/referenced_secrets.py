"""The Secret cache, kept to the Secrets some runtime references.

The controller only ever asks whether a referenced Secret exists, yet a
cluster-wide Secret watch would otherwise cache every Secret in the cluster
(a cost that grows with objects that have nothing to do with us). So this
store admits a Secret only while the runtimes' reference index
(`controller.runtime.mapping.SecretReferences`) names it: each list page and each
watch event is filtered as it arrives, and an entry goes when its last
reference does.

A reference that appears after the Secret list began may name a Secret the
list already passed over, so its existence is *unknown* until a lookup (a
metadata-only list by name, `controller.runtime.secret_presence`) answers, or a watch
event or a completed relist says first; a lookup answer older than either is
discarded. Reading "unknown" as "missing" would report SecretNotFound for a
Secret that exists.
"""

import asyncio
import enum
import itertools
from collections import deque

from trussium_operator.controller.machinery.cache import Change, Obj, Store
from trussium_operator.controller.machinery.names import NamespacedName
from trussium_operator.controller.runtime.compact import secret_form
from trussium_operator.controller.runtime.mapping import SecretReferences


class Presence(enum.Enum):
    PRESENT = "present"
    MISSING = "missing"
    UNKNOWN = "unknown"


class ReferencedSecrets(Store):
    def __init__(self, references: SecretReferences) -> None:
        super().__init__(secret_form)
        self._references = references
        self._listed = False  # a list has begun: from now on a new reference needs a lookup
        self._tokens = itertools.count()
        # Referenced after the list began and not known since; the token names the wait.
        self._unknown: dict[NamespacedName, int] = {}
        # The unknown keys the list in progress will settle when it completes.
        self._covered: dict[NamespacedName, int] = {}
        # Referenced while it runs: its pages may have passed them over.
        self._uncovered: set[NamespacedName] = set()
        self._lookup_errors: dict[NamespacedName, str] = {}
        self._wanted: deque[tuple[NamespacedName, int]] = deque()
        self._wake = asyncio.Event()
        references.listen(self)

    # --- what the reconciler reads --------------------------------------------

    def presence(self, key: NamespacedName) -> Presence:
        if key in self._unknown:
            return Presence.UNKNOWN
        return Presence.MISSING if self.get(key) is None else Presence.PRESENT

    def lookup_error(self, key: NamespacedName) -> str | None:
        """Why the last lookup of this unknown Secret failed, if it did."""
        return self._lookup_errors.get(key)

    # --- the reference index tells -------------------------------------------

    def referenced(self, key: NamespacedName) -> None:
        """A runtime references `key`, and none did before. Before the first list
        began, that list covers it; after, the list may have passed it over."""
        if self._listed:
            self._uncovered.add(key)
            token = next(self._tokens)
            self._unknown[key] = token
            self._wanted.append((key, token))
            self._wake.set()

    def unreferenced(self, key: NamespacedName) -> None:
        """No runtime references `key` any more: forget it."""
        self._settle(key)
        self._objects.pop(key, None)

    # --- the informer fills ---------------------------------------------------

    def admits(self, obj: Obj) -> bool:
        return NamespacedName.of(obj) in self._references

    def listing(self) -> None:
        self._listed = True
        self._covered = dict(self._unknown)
        self._uncovered = set()

    def upsert(self, obj: Obj) -> Change | None:
        if not self.admits(obj):
            return None
        self._settle(NamespacedName.of(obj))
        return super().upsert(obj)

    def delete(self, obj: Obj) -> Change | None:
        key = NamespacedName.of(obj)
        if key not in self._references:
            return None
        self._settle(key)
        old = self._objects.pop(key, None)
        return Change(old, None) if old is not None else _gone(key)

    def replace(self, items: list[Obj]) -> list[Change]:
        """A list settles every key unknown when it began. One referenced while it ran
        may have been passed over: its absence from the list says nothing, so what
        a lookup or an event said of it stays, and so does its being unknown."""
        fresh = [item for item in items if self.admits(item)]
        listed = {NamespacedName.of(item) for item in fresh}
        for key in self._uncovered - listed:
            if (known := self.get(key)) is not None:
                fresh.append(known)
        changes = super().replace(fresh)
        for key, token in self._covered.items():
            if self._unknown.get(key) == token:
                self._settle(key)
                if self.get(key) is None:
                    changes.append(_gone(key))
        self._covered, self._uncovered = {}, set()
        return changes

    # --- the lookup answers ---------------------------------------------------

    async def next_lookup(self) -> tuple[NamespacedName, int]:
        """The next unknown key to look up, with the token its answer must carry."""
        while True:
            while self._wanted:
                key, token = self._wanted.popleft()
                if self._unknown.get(key) == token:
                    return key, token
            self._wake.clear()
            await self._wake.wait()

    def looked_up(self, key: NamespacedName, token: int, obj: Obj | None) -> Change | None:
        """A lookup's answer, unless a watch event, a relist or a lost reference came
        first (then it may be older than what the store knows)."""
        if self._unknown.get(key) != token:
            return None
        self._settle(key)
        return _gone(key) if obj is None else super().upsert(obj)

    def lookup_failed(self, key: NamespacedName, token: int, error: str) -> Change | None:
        """Still unknown, and now reported as a failed check until a retry answers."""
        if self._unknown.get(key) != token:
            return None
        self._lookup_errors[key] = error
        return _gone(key)

    def retry(self, key: NamespacedName, token: int) -> None:
        if self._unknown.get(key) == token:
            self._wanted.append((key, token))
            self._wake.set()

    def _settle(self, key: NamespacedName) -> None:
        self._unknown.pop(key, None)
        self._lookup_errors.pop(key, None)


def _gone(key: NamespacedName) -> Change:
    """A change that names a Secret known to be absent, for the mapper to enqueue its runtimes."""
    return Change({"metadata": {"namespace": key.namespace, "name": key.name}}, None)
