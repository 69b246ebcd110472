"""Names of the Secrets in a namespace, read as metadata only.

The validating hook warns about a referenced Secret that does not exist yet.
It asks the API server for PartialObjectMetadata, so Secret values never
reach this process.
"""

from collections.abc import Awaitable, Callable

from kubernetes_asyncio import client

from trussium_operator.cmdline.metadata_only import METADATA_ONLY


def secret_names_lister(
    api_client: client.ApiClient,
) -> Callable[[str], Awaitable[frozenset[str]]]:
    async def secret_names(namespace: str) -> frozenset[str]:
        response = await api_client.call_api(
            "/api/v1/namespaces/{namespace}/secrets",
            "GET",
            path_params={"namespace": namespace},
            header_params={"Accept": METADATA_ONLY},
            auth_settings=["BearerToken"],
            _preload_content=False,
        )
        async with response:
            response.raise_for_status()
            listing = await response.json()
        return frozenset(item["metadata"]["name"] for item in listing.get("items") or ())

    return secret_names
