"""Where both programs and `certs inject` find the API server and their credentials."""

import asyncio
import contextlib
from pathlib import Path

from aiohttp.helpers import get_env_proxy_for_url
from kubernetes_asyncio import client, config
from yarl import URL

from trussium_operator.cmdline.options import ConfigurationError


async def new_api_client(kubeconfig: str | None) -> client.ApiClient:
    """An API client from `--kubeconfig` when given, else in-cluster, else
    $KUBECONFIG or ~/.kube/config.

    kubernetes_asyncio raises assorted exception types on a malformed file
    (even TypeError), so every failure becomes one ConfigurationError line.
    """
    if kubeconfig and not await asyncio.to_thread(Path(kubeconfig).is_file):
        raise ConfigurationError(f"--kubeconfig {kubeconfig}: no such file")
    configuration = client.Configuration()
    try:
        if kubeconfig:
            await config.load_kube_config(
                config_file=kubeconfig, client_configuration=configuration
            )
        else:
            try:
                config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
            except config.ConfigException:
                await config.load_kube_config(client_configuration=configuration)
    except Exception as error:
        where = f"--kubeconfig {kubeconfig}" if kubeconfig else "the kubeconfig"
        raise ConfigurationError(f"cannot use {where}: {error}") from None
    return environment_read_once(configuration)


def environment_read_once(configuration: client.Configuration) -> client.ApiClient:
    """An API client that takes its proxy from the environment here, once.

    kubernetes_asyncio's session trusts the environment, so aiohttp reads the
    proxy variables and ~/.netrc in a worker thread before every request: two
    thread hops per request, milliseconds each on a busy machine, on the way
    of every status write (ADR 0016). HTTPS_PROXY and NO_PROXY still apply
    (client-go honours them too), read when the client is made; netrc
    credentials were never a way to reach the API server.
    """
    if not configuration.proxy:
        with contextlib.suppress(LookupError):
            proxy, auth = get_env_proxy_for_url(URL(str(configuration.host)))
            configuration.proxy = str(proxy)
            if auth is not None:
                configuration.proxy_headers = {"Proxy-Authorization": auth.encode()}
    api = client.ApiClient(configuration)
    api.rest_client.pool_manager._trust_env = False
    return api
