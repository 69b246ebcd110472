"""The images built here, run in real containers (runc) confined as the pods
that run them: the image's own numeric user, a read-only root filesystem, no
capabilities, no privilege escalation.
"""

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from devcluster.layout import free_port
from devcluster.polling import wait_for
from hack.image.dockerfile import DOCKERFILE, python_version
from hack.image.images import build
from tests.image.chart import chart_containers
from tests.image.containers import Bundle
from tests.image.standin import get, listening, live, local, refused, rendered_environment
from tests.support.uploads import upload
from trussium_operator.common import constants as c

pytestmark = pytest.mark.image

OPERATOR_UID = 65532
EXIT_TIMEOUT_SECONDS = 15
# Generous for a loaded machine, and still far short of the 600 s drain period.
LISTENER_CLOSE_SECONDS = 30
# Every module of the package the wheel ships, imported as the programs would.
IMPORT_ALL = """
import importlib, pkgutil
for name in ("trussium_operator",):
    package = importlib.import_module(name)
    for module in pkgutil.walk_packages(package.__path__, name + "."):
        importlib.import_module(module.name)
print("imported")
"""


@pytest.fixture(scope="module")
def operator(operator_tarball: Path) -> Iterator[Bundle]:
    with tempfile.TemporaryDirectory() as scratch:
        yield Bundle(operator_tarball, Path(scratch))


@pytest.fixture(scope="module")
def standin() -> Iterator[Bundle]:
    with tempfile.TemporaryDirectory() as scratch:
        yield Bundle(build("standin"), Path(scratch))


@pytest.mark.parametrize("program", ["webhook", "controller"])
def test_the_charts_programs_run_as_the_image_user_on_a_read_only_root(
    operator: Bundle, program: str
) -> None:
    (container,) = [c for c in chart_containers() if c["name"] == program]
    command = [*container["command"], container["args"][0], "--help"]
    result = operator.run(command)
    assert result.returncode == 0, result.stderr
    assert f"usage: {container['command'][0]} {container['args'][0]}" in result.stdout


def test_runs_as_65532_with_the_dockerfiles_python_and_cannot_write_its_root(
    operator: Bundle,
) -> None:
    probe = "import os, sys; print(os.getuid(), os.getgid(), '%d.%d' % sys.version_info[:2])"
    result = operator.run(["python3", "-c", probe])
    assert result.returncode == 0, result.stderr
    python = python_version(DOCKERFILE.read_text())
    assert result.stdout.split() == [str(OPERATOR_UID), str(OPERATOR_UID), python]
    written = operator.run(["python3", "-c", "open('/usr/local/probe', 'w')"])
    assert written.returncode != 0
    assert "Read-only file system" in written.stderr


def test_every_module_imports_without_writing_bytecode(operator: Bundle) -> None:
    result = operator.run(["python3", "-c", IMPORT_ALL])
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "imported"


@pytest.mark.parametrize(
    ("scratch", "spooled", "logged"),
    [
        (True, (200, "/tmp"), "uploads over 1 MiB spool to /tmp"),
        (False, (400, "There was an error parsing the body"), "uploads over 1 MiB will fail"),
    ],
    ids=["with-scratch", "without-scratch"],
)
def test_standin_in_a_container_spools_uploads_only_to_its_scratch_space(
    standin: Bundle, scratch: bool, spooled: tuple[int, str], logged: str
) -> None:
    """On a read-only root, only a mounted /tmp takes an upload over 1 MiB; without
    one it fails as the real runtime does, and smaller uploads still pass."""
    port = free_port()
    env = local(rendered_environment("runtime.yaml"), port) | {c.SCRATCH_ENV: c.SCRATCH_PATH}
    with standin.start(env=env, host_network=True, scratch=scratch) as (container, process):
        wait_for(lambda: live(port), "the stand-in to serve in its container", timeout=20)
        assert get(port, c.READY_PATH) == (200, {"status": "ready"})
        url = f"http://127.0.0.1:{port}"
        small_status, small = upload(url, 100_000)
        large_status, large = upload(url, 2_000_000)
        standin.signal(container, "TERM")
        _, stderr = process.communicate(timeout=EXIT_TIMEOUT_SECONDS)
    assert (small_status, small["file"]["spooledTo"]) == (200, "")
    assert (large_status, large["file"]["spooledTo"] if scratch else large["detail"]) == spooled
    assert process.returncode == 0, stderr
    assert logged in stderr


def test_standin_in_a_container_refuses_connections_at_sigterm_and_exits_when_idle(
    standin: Bundle,
) -> None:
    port, drain = free_port(), 600
    env = local(rendered_environment("runtime.yaml"), port) | {c.ENV_GRACEFUL_SHUTDOWN: str(drain)}
    with standin.start(env=env, host_network=True) as (container, process):
        wait_for(lambda: live(port), "the stand-in to serve in its container", timeout=20)
        standin.signal(container, "TERM")
        wait_for(
            lambda: not listening(port), "the listener to close", timeout=LISTENER_CLOSE_SECONDS
        )
        assert refused(port), "a new connection was not refused"
        _, stderr = process.communicate(timeout=EXIT_TIMEOUT_SECONDS)  # not the drain period
        assert process.returncode == 0, stderr
        assert "refusing" not in stderr
        assert "no request in flight after" in stderr


@pytest.mark.parametrize(
    ("options", "reason"),
    [
        ({"readonly": False}, "the root filesystem is writable"),
        ({"uid": 0}, "running as root (uid 0)"),
    ],
    ids=["writable-root", "root"],
)
def test_standin_refuses_a_container_that_breaks_the_contract(
    standin: Bundle, options: dict[str, object], reason: str
) -> None:
    env = rendered_environment("runtime.yaml")
    result = standin.run(None, env=env, **options)
    assert result.returncode == 1
    assert f"refusing to start: {reason}" in result.stderr


def test_pause_holds_until_sigterm_then_exits_zero() -> None:
    with tempfile.TemporaryDirectory() as scratch:
        pause = Bundle(build("pause"), Path(scratch))
        with pause.start() as (container, process):
            wait_for(lambda: pause.status(container) == "running", "pause to run", timeout=20)
            assert process.poll() is None
            pause.signal(container, "TERM")
            process.communicate(timeout=EXIT_TIMEOUT_SECONDS)
            assert process.returncode == 0
