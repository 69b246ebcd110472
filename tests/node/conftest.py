"""Fixtures for tests on a real node (`@pytest.mark.node`): the node profile's
control plane, started once per session and only if a selected test asks.

On a host that cannot run it (not root, no writable cgroups, no iptables),
every node test skips with the one-line reason.
"""

from collections.abc import Iterator

import pytest

from devcluster import ControlPlane, Profile
from devcluster.node import unsupported_reason
from tests.conftest import PLANE_KEY


@pytest.fixture(scope="session")
def node_plane() -> Iterator[ControlPlane]:
    reason = unsupported_reason()
    if reason is not None:
        pytest.skip(f"node profile unavailable: {reason}")
    with ControlPlane(Profile.NODE) as plane:
        yield plane


@pytest.fixture
def plane(node_plane: ControlPlane, request: pytest.FixtureRequest) -> ControlPlane:
    """In this directory, `plane` (and so `namespace` and `kubectl`) is the node plane."""
    if not request.node.get_closest_marker("node"):
        pytest.fail("a test under tests/node must be marked node", pytrace=False)
    request.node.stash[PLANE_KEY] = node_plane
    return node_plane
