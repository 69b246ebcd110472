"""Where both programs and `certs inject` find the API server and their credentials."""

import asyncio
from pathlib import Path

from kubernetes_asyncio import client, config

from cmdline.options import ConfigurationError


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
    return client.ApiClient(configuration)
