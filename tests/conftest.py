"""Fixtures that put tests on a real local control plane (devcluster).

Mark a test `@pytest.mark.api` (etcd + kube-apiserver) or
`@pytest.mark.cluster` (plus controllers, scheduler and kwok nodes) and ask
for `plane`, `namespace`, `kubectl` or `api_client`. Each profile's plane is
started once per session, and only if some selected test asks for it, so
`pytest -m "not api and not cluster"` never starts one.

With `TRUSSIUM_CLUSTER=kubeconfig`, the cluster tier runs on the cluster of
`$KUBECONFIG` instead (devcluster.external); the tests that need our own
plane's internals, and the api, node and faults tiers, skip with the reason.
"""

import secrets
import subprocess
from collections.abc import AsyncIterator, Callable, Generator, Iterator
from pathlib import Path

import pytest
from kubernetes_asyncio import client, config

from devcluster import ControlPlane, Profile
from devcluster.external import ClusterChoiceError, ExternalCluster, chosen_kubeconfig

PLANE_KEY = pytest.StashKey[ControlPlane]()
GIVEN_KUBECONFIG = pytest.StashKey[Path | None]()
OWN_PLANE_TIERS = ("api", "node", "faults")
LOG_TAIL_LINES = 30

Kubectl = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture(scope="session")
def api_plane() -> Iterator[ControlPlane]:
    with ControlPlane(Profile.API) as plane:
        yield plane


@pytest.fixture(scope="session")
def cluster_plane(pytestconfig: pytest.Config) -> Iterator[ControlPlane]:
    given = pytestconfig.stash[GIVEN_KUBECONFIG]
    with ExternalCluster(given) if given else ControlPlane(Profile.CLUSTER) as plane:
        yield plane


def pytest_configure(config: pytest.Config) -> None:
    try:
        config.stash[GIVEN_KUBECONFIG] = chosen_kubeconfig()
    except ClusterChoiceError as error:
        raise pytest.UsageError(str(error)) from None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On a given cluster, skip what needs the local plane, saying what it needs."""
    given = config.stash[GIVEN_KUBECONFIG]
    if given is None:
        return
    for item in items:
        own = item.get_closest_marker("own_plane")
        tier = next((t for t in OWN_PLANE_TIERS if item.get_closest_marker(t)), None)
        if own is not None:
            need = own.args[0] if own.args else "the local control plane"
        elif tier is not None:
            need = f"the local control plane (the {tier} tier)"
        else:
            continue
        reason = f"needs {need}; TRUSSIUM_CLUSTER=kubeconfig gives {given}"
        item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture
def plane(request: pytest.FixtureRequest) -> ControlPlane:
    """The session's control plane for this test's marker (cluster wins over api)."""
    if request.node.get_closest_marker("cluster"):
        chosen: ControlPlane = request.getfixturevalue("cluster_plane")
    elif request.node.get_closest_marker("api"):
        chosen = request.getfixturevalue("api_plane")
    else:
        pytest.fail("a test using the control plane must be marked api or cluster", pytrace=False)
    request.node.stash[PLANE_KEY] = chosen
    return chosen


@pytest.fixture
def namespace(plane: ControlPlane, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace named after the test, deleted (without waiting) afterwards."""
    stem = "".join(c if c.isalnum() else "-" for c in request.node.name.lower())
    name = f"{stem[:48].strip('-')}-{secrets.token_hex(3)}"
    plane.create_namespace(name)
    yield name
    plane.delete_namespace(name)


@pytest.fixture
def kubectl(plane: ControlPlane) -> Kubectl:
    return plane.kubectl


@pytest.fixture
async def api_client(plane: ControlPlane) -> AsyncIterator[client.ApiClient]:
    configuration = client.Configuration()
    await config.load_kube_config(
        config_file=str(plane.kubeconfig), client_configuration=configuration
    )
    async with client.ApiClient(configuration) as api:
        yield api


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """On failure, attach the tail of each component log of the test's plane."""
    report = yield
    plane = item.stash.get(PLANE_KEY, None)
    if report.failed and plane is not None:
        report.sections.append(
            (f"devcluster {plane.profile} logs", plane.tail_logs(LOG_TAIL_LINES))
        )
    return report
