"""Fixtures for tests on a real node (`@pytest.mark.node`): the node profile's
control plane, started once per session and only if a selected test asks.

On a host that cannot run it (not root, no writable cgroups, no iptables),
every node test skips with the one-line reason.
"""

from collections.abc import Iterator
from pathlib import Path

import pytest

from devcluster import ControlPlane, Profile
from devcluster.controller_harness import running_controller, scoped
from devcluster.hostoperator import install_crds
from devcluster.node import unsupported_reason
from tests.conftest import PLANE_KEY
from tests.node.runtime_image import import_standin


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


@pytest.fixture(scope="module")
def standin(node_plane: ControlPlane) -> None:
    """The CRD installed and the stand-in runtime image in the node's containerd."""
    install_crds(node_plane)
    import_standin(node_plane)


@pytest.fixture
def controller(plane: ControlPlane, namespace: str, tmp_path: Path) -> Iterator[None]:
    """The real controller on the host, confined to the test's namespace."""
    with running_controller(plane, tmp_path / "controller.log", *scoped(namespace)):
        yield
