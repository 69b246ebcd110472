"""Whether the Secrets a runtime references exist: the reconcile's one question about
Secrets, and everything that answers it.

`SecretPresence` holds the runtimes' Secret-reference index (`controller.runtime.mapping`,
fed by the runtimes cache), the Secret cache scoped to the Secrets it names
(`controller.runtime.referenced_secrets`, fed by the Secret watch) and the lookups of
Secrets referenced after the Secret list passed them over. The reconciler asks
`check`; the watch table wires `references` and `cache`; the manager runs
`look_up`.

The controller may list and watch Secrets, never get them, so a lookup is a
metadata-only list of the one name (`fieldSelector=metadata.name=<name>`) in
its namespace. One lookup runs at a time: they are rare (a new reference) and
each is a single small request. A failed lookup reports the reference check
as failed (the contract's `ReferenceCheckFailed`) and is retried with a backoff;
a throttled one (ADR 0038) is retried, no sooner than its `Retry-After`, with
nothing reported.
"""

import asyncio
from collections.abc import Callable, Sequence

from trussium_operator.cmdline.metadata_only import METADATA_ONLY
from trussium_operator.common.status import Outcome
from trussium_operator.controller.machinery.backoff import Backoff, honouring
from trussium_operator.controller.machinery.cache import Cache, Change
from trussium_operator.controller.machinery.kube import (
    SECRETS,
    ApiError,
    Kube,
    KubeError,
    describe,
)
from trussium_operator.controller.machinery.names import NamespacedName
from trussium_operator.controller.runtime.mapping import SecretReferences
from trussium_operator.controller.runtime.referenced_secrets import Presence, ReferencedSecrets


class SecretPresence:
    """`checked=False`: an install without Secret rights (ADR 0028); nothing is listed,
    watched or looked up, and every reference is reported as not checked."""

    def __init__(self, *, checked: bool = True) -> None:
        self.checked = checked
        self.references = SecretReferences()
        self._store = ReferencedSecrets(self.references)
        self.cache = Cache(self._store)

    def presence(self, secret: NamespacedName) -> Presence:
        return self._store.presence(secret)

    def check(self, namespace: str, names: Sequence[str]) -> Outcome | None:
        """What the status says of the referenced Secrets `names`: an Outcome naming
        the missing ones, or the reason the check failed; None while one referenced
        since the last list is still being looked up. The contract's status table has
        no row for "not known yet", and it is neither missing nor a failure: the
        reconcile waits (the lookup's answer enqueues the runtime)."""
        if not names:
            return Outcome()
        if not self.checked:
            return Outcome(unchecked_secrets=tuple(names))
        if not self.cache.synced.is_set() or self.cache.last_error:
            reason = self.cache.last_error or "the Secret cache is not synced yet"
            return Outcome(reference_check_error=f"cannot list Secrets: {reason}")
        keys = {name: NamespacedName(namespace, name) for name in names}
        for key in keys.values():
            if error := self._store.lookup_error(key):
                return Outcome(reference_check_error=error)
        presence = {name: self._store.presence(key) for name, key in keys.items()}
        if Presence.UNKNOWN in presence.values():
            return None
        return Outcome(missing_secrets=tuple(n for n in names if presence[n] is Presence.MISSING))

    def versions(self, namespace: str, names: Sequence[str]) -> dict[str, str]:
        """Each cached Secret of `names` as `<uid>/<resourceVersion>`: what the metadata-only
        watch saw last, so an update of one (and only of one) changes the answer."""
        found: dict[str, str] = {}
        for name in names:
            secret = self._store.get(NamespacedName(namespace, name))
            if secret is not None:
                meta = secret["metadata"]
                found[name] = f"{meta.get('uid', '')}/{meta.get('resourceVersion', '')}"
        return found

    async def look_up(self, kube: Kube, on_change: Callable[[Change], None]) -> None:
        """Answer the store's unknown Secrets until cancelled, telling `on_change` each
        answer."""
        store = self._store
        backoff = Backoff()
        loop = asyncio.get_running_loop()
        while True:
            key, token = await store.next_lookup()
            query = {"fieldSelector": f"metadata.name={key.name}"}
            try:
                page = await kube.request(
                    "GET", SECRETS.path(key.namespace), query=query, accept=METADATA_ONLY
                )
            except KubeError as error:
                delay = backoff.failed()
                if isinstance(error, ApiError) and error.throttled:
                    # Overload says nothing about the Secret: the runtime keeps waiting,
                    # and the lookup waits as long as the API server asked (ADR 0038).
                    delay = honouring(delay, error.retry_after, backoff.cap)
                    change = None
                else:
                    message = f"cannot list Secrets: {describe(error)}"
                    change = store.lookup_failed(key, token, message)
                loop.call_later(delay, store.retry, key, token)
            else:
                backoff.healthy()
                items = page.get("items") or []
                change = store.looked_up(key, token, items[0] if items else None)
            if change is not None:
                on_change(change)
