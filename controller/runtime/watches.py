"""What the controller watches, one entry per watch, and the caches they fill.

The table reads as controller-runtime's builder sentence:
For(TrussiumRuntime, generation changed).Owns(each kind of the registry,
`controller/runtime/kinds.py`).Watches(Secret metadata, referencing runtimes).

Each entry names its role, which is how its cache is addressed: `runtimes`,
`secrets`, or the managed kind it owns.
"""

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

from trussium_operator.common import constants as c
from trussium_operator.controller.machinery.cache import (
    Cache,
    Change,
    Index,
    Obj,
    Store,
    strip_bookkeeping,
)
from trussium_operator.controller.machinery.kube import SECRETS, Resource
from trussium_operator.controller.machinery.names import NamespacedName
from trussium_operator.controller.runtime.compact import managed_form, runtime_form
from trussium_operator.controller.runtime.kinds import MANAGED_KINDS, RUNTIMES, ManagedKind
from trussium_operator.controller.runtime.mapping import owner_of, runtime_change
from trussium_operator.controller.runtime.secret_presence import SecretPresence

RUNTIMES_ROLE = "runtimes"
SECRETS_ROLE = "secrets"
Mapper = Callable[[Change], list[NamespacedName]]


@dataclass(frozen=True)
class Watch:
    role: str
    resource: Resource
    # The runtimes a change of this kind must reconcile.
    map_to: Mapper
    label_selector: str | None = None
    # Listed and watched as PartialObjectMetadata: never an object's content.
    metadata_only: bool = False
    # What of each object the cache keeps.
    transform: Callable[[Obj], Obj] = strip_bookkeeping
    # Kept up to date with the cache, for a mapper to read.
    index: Index | None = None
    # A cache of its own (then transform and index are its business).
    cache: Cache | None = None
    # The role whose cache must sync before this watch lists: its store filters by it.
    after: str | None = None
    # Its API may not be served (a CRD not installed): the cache counts as synced,
    # empty, until the API appears (`controller.machinery.informer`).
    optional: bool = False


def watch_table(
    secrets: SecretPresence, kinds: tuple[ManagedKind, ...] = MANAGED_KINDS
) -> tuple[Watch, ...]:
    """Every watch: the runtimes cache keeps the Secret references up to date, which
    the Secret mapper reads and the Secret cache keeps to (no Secret watch when
    references are not checked)."""
    references = secrets.references
    return (
        Watch(RUNTIMES_ROLE, RUNTIMES, runtime_change, transform=runtime_form, index=references),
        *(
            Watch(
                kind.kind,
                kind.resource,
                owner_of,
                c.MANAGED_SELECTOR,
                transform=managed_form(kind.reads),
                optional=kind.optional,
            )
            for kind in kinds
        ),
        *(
            [
                Watch(
                    SECRETS_ROLE,
                    SECRETS,
                    references.runtimes_referencing,
                    metadata_only=True,
                    cache=secrets.cache,
                    after=RUNTIMES_ROLE,
                )
            ]
            if secrets.checked
            else []
        ),
    )


class Caches:
    """Every watch's cache, by role."""

    def __init__(self, by_role: Mapping[str, Cache]) -> None:
        self._by_role = dict(by_role)

    @classmethod
    def for_watches(cls, watches: tuple[Watch, ...]) -> "Caches":
        return cls(
            {
                w.role: w.cache if w.cache is not None else Cache(Store(w.transform, w.index))
                for w in watches
            }
        )

    def __getitem__(self, role: str) -> Cache:
        return self._by_role[role]

    def __iter__(self) -> Iterator[Cache]:
        return iter(self._by_role.values())

    @property
    def runtimes(self) -> Cache:
        return self._by_role[RUNTIMES_ROLE]

    def owned(self, kind: str) -> Cache:
        return self._by_role[kind]
