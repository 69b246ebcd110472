"""Fault-injection tests run on a cluster-profile control plane of their own.

They kill, freeze and restart its components, so no other test shares it;
after each test every component is resumed and any stopped one started
again, so a failed test cannot leave the next one a broken plane.
"""

from collections.abc import Iterator

import pytest

from devcluster import ControlPlane, Profile
from devcluster.hostoperator import install_crds
from tests.conftest import PLANE_KEY

# ConfigMaps bypass the API server's watch cache, so a watch from a version etcd
# compacted away gets 410 Gone (test_watch_expiry.py); every other kind is cached.
APISERVER_ARGS = ("--watch-cache-sizes=configmaps#0",)


@pytest.fixture(scope="session")
def fault_plane() -> Iterator[ControlPlane]:
    with ControlPlane(Profile.CLUSTER, apiserver_args=APISERVER_ARGS) as plane:
        install_crds(plane)
        yield plane


@pytest.fixture
def plane(request: pytest.FixtureRequest, fault_plane: ControlPlane) -> Iterator[ControlPlane]:
    request.node.stash[PLANE_KEY] = fault_plane
    yield fault_plane
    for name in fault_plane.pids:
        fault_plane.resume_component(name)
    for name in fault_plane.pids:
        if fault_plane.component_exited(name):
            fault_plane.start_component(name)
