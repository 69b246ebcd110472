"""Looking up the Secrets the scoped Secret cache does not know yet.

The cache keeps only referenced Secrets (`controller.referenced_secrets`), so a
reference that appears after the Secret list may name one it passed over. The
controller may list and watch Secrets, never get them, so the lookup is a
metadata-only list of the one name (`fieldSelector=metadata.name=<name>`) in
its namespace. One lookup runs at a time: they are rare (a new reference) and
each is a single small request. A failed lookup reports the reference check
as failed (the contract's `ReferenceCheckFailed`) and is retried with a backoff.
"""

import asyncio
from collections.abc import Callable

from cmdline.metadata_only import METADATA_ONLY
from controller.machinery.backoff import Backoff
from controller.machinery.cache import Change
from controller.machinery.kube import SECRETS, Kube, KubeError, describe
from controller.referenced_secrets import ReferencedSecrets


async def look_up_secrets(
    kube: Kube, store: ReferencedSecrets, on_change: Callable[[Change], None]
) -> None:
    """Answer the store's unknown Secrets until cancelled, telling `on_change` each answer."""
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
            change = store.lookup_failed(key, token, f"cannot list Secrets: {describe(error)}")
            loop.call_later(backoff.failed(), store.retry, key, token)
        else:
            backoff.healthy()
            items = page.get("items") or []
            change = store.looked_up(key, token, items[0] if items else None)
        if change is not None:
            on_change(change)
