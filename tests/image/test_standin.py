"""The stand-in Trussium runtime, run as a plain process: the binary shipped in
the stand-in image, fed the environment the operator renders.

Its checks of the container sandbox (not root, read-only root filesystem) are
proven here from the refusing side; tests/image/test_containers.py runs it
in a real container where both hold.
"""

import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from common import constants as c
from devcluster.layout import free_port
from devcluster.polling import wait_for
from hack.image.images import STANDIN_BINARY, build
from hack.image.oci import extract
from tests.image.standin import API_KEY, draining, get, live, local, rendered_environment

RUNTIME_UID = c.RUNTIME_UID
EXIT_TIMEOUT_SECONDS = 15


@pytest.fixture(scope="module")
def standin() -> Iterator[Path]:
    """The stand-in binary, copied out of its image where any user can run it."""
    with tempfile.TemporaryDirectory() as scratch:
        directory = Path(scratch)
        directory.chmod(0o755)
        binary = directory / STANDIN_BINARY
        extract(build("standin"), STANDIN_BINARY, binary)
        binary.chmod(0o755)
        yield binary


def as_runtime_user() -> dict[str, Any]:
    """Popen arguments that drop root to the runtime's uid (nothing when not root)."""
    if os.geteuid() != 0:
        return {}
    return {"user": RUNTIME_UID, "group": c.RUNTIME_GID, "extra_groups": []}


def run(binary: Path, env: Mapping[str, str], *args: str, **popen: Any) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [str(binary), *args],
        env=dict(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **popen,
    )


def serving(process: subprocess.Popen[str], port: int) -> bool:
    if process.poll() is not None:
        pytest.fail(f"the stand-in exited {process.returncode}: {process.communicate()[1]}")
    return live(port)


def test_refuses_to_run_as_root(standin: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("starting it as root needs root")
    process = run(standin, rendered_environment("runtime.yaml"), "--allow-writable-root")
    _, stderr = process.communicate(timeout=EXIT_TIMEOUT_SECONDS)
    assert process.returncode == 1
    assert "refusing to start: running as root (uid 0)" in stderr


def test_refuses_a_writable_root_filesystem_it_did_not_ask_for(standin: Path) -> None:
    if os.statvfs("/").f_flag & os.ST_RDONLY:
        pytest.skip("this host's root filesystem is read-only")
    process = run(standin, rendered_environment("runtime.yaml"), **as_runtime_user())
    _, stderr = process.communicate(timeout=EXIT_TIMEOUT_SECONDS)
    assert process.returncode == 1
    assert "refusing to start: the root filesystem is writable" in stderr


def test_reports_every_configuration_problem_and_no_value(standin: Path) -> None:
    env = {
        "TRUSSIUM_PROVIDER__NAME": "bedrock",
        "TRUSSIUM_RUNTIME__PORT": "70000",
        "TRUSSIUM_PROVIDER__BASE_URL": "ftp://user:hunter2@models.example",
        "TRUSSIUM_TIMEOUTS__STREAM_IDLE_SECONDS": "0x10",
        "TRUSSIUM_PROVIDER__MODEL": "llama3.2",
    }
    process = run(standin, env, "--allow-writable-root", **as_runtime_user())
    _, stderr = process.communicate(timeout=EXIT_TIMEOUT_SECONDS)
    assert process.returncode == 1
    assert "invalid configuration" in stderr
    for key in env:
        assert key in stderr
    assert "hunter2" not in stderr
    assert "bedrock" not in stderr


def test_reads_what_the_operator_renders_and_never_shows_the_key(standin: Path) -> None:
    port = free_port()
    env = local(rendered_environment("runtime-production.yaml"), port)
    process = run(standin, env, "--allow-writable-root", **as_runtime_user())
    try:
        wait_for(lambda: serving(process, port), "the stand-in to serve", timeout=10)
        status, parsed = get(port, "/standin/config")
        # The example drains for 45 s; a second signal during the drain ends it.
        process.send_signal(signal.SIGTERM)
        wait_for(lambda: draining(port), "the stand-in to drain", timeout=5)
    finally:
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=EXIT_TIMEOUT_SECONDS)
    assert process.returncode == 0, stderr
    assert "interrupt again: stopping now" in stderr
    assert status == 200
    assert parsed == {
        "environment": "production",
        "host": "127.0.0.1",
        "port": port,
        "provider": "openai",
        "baseURL": "https://api.openai.com/v1",
        "providerRequestTimeoutSeconds": 60,
        "streamIdleTimeoutSeconds": 30,
        "gracefulShutdownSeconds": 45,
        "apiKeySet": True,
    }
    assert API_KEY not in stderr


def test_serves_the_probe_paths_and_drains_on_sigterm(standin: Path) -> None:
    port, drain = free_port(), 2
    env = local(rendered_environment("runtime.yaml"), port) | {c.ENV_GRACEFUL_SHUTDOWN: str(drain)}
    process = run(standin, env, "--allow-writable-root", **as_runtime_user())
    wait_for(lambda: serving(process, port), "the stand-in to serve", timeout=10)
    assert get(port, c.LIVE_PATH) == (200, {"status": "live"})
    assert get(port, c.READY_PATH) == (200, {"status": "ready"})

    process.send_signal(signal.SIGTERM)
    signalled = time.monotonic()
    wait_for(lambda: draining(port), "readiness to fail while draining", 5)
    assert get(port, c.LIVE_PATH)[0] == 200, "still live while draining"
    _, stderr = process.communicate(timeout=drain + EXIT_TIMEOUT_SECONDS)
    assert process.returncode == 0, stderr
    assert time.monotonic() - signalled >= drain, "exited before the configured drain"
    assert f"not ready; draining for {drain}s" in stderr
