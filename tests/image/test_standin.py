"""The stand-in Trussium runtime, run as a plain process: the binary shipped in
the stand-in image, fed the environment the operator renders.

Its checks of the container sandbox (not root, read-only root filesystem) are
proven here from the refusing side; tests/image/test_containers.py runs it
in a real container where both hold, and where no temporary directory is
writable unless one is mounted.
"""

import os
import signal
import subprocess
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devcluster.layout import free_port
from devcluster.polling import wait_for
from tests.image.standin import (
    API_KEY,
    as_runtime_user,
    get,
    listening,
    local,
    refused,
    rendered_environment,
    run,
    serving,
)
from tests.support.uploads import Upload, upload
from trussium_operator.common import constants as c

EXIT_TIMEOUT_SECONDS = 15
# Generous for a loaded machine, and still far short of the drain period below.
LISTENER_CLOSE_SECONDS = 30
# Long enough that a stand-in waiting it out instead of exiting when idle fails the test.
LONG_DRAIN_SECONDS = 600
MB = 1_000_000


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
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=EXIT_TIMEOUT_SECONDS)
    assert process.returncode == 0, stderr
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


@pytest.fixture
def scratch() -> Iterator[Path]:
    """A directory the runtime's user may write, as TMPDIR (pytest's tmp_path is
    root's alone, and the stand-in would fall back to /tmp as Python does)."""
    with tempfile.TemporaryDirectory() as name:
        directory = Path(name)
        directory.chmod(0o1777)
        yield directory


@pytest.fixture
def serving_standin(standin: Path, scratch: Path) -> Iterator[tuple[int, subprocess.Popen[str]]]:
    """The stand-in serving on a free port with TMPDIR=scratch and a long drain period."""
    port = free_port()
    env = local(rendered_environment("runtime.yaml"), port) | {
        "TMPDIR": str(scratch),
        c.ENV_GRACEFUL_SHUTDOWN: str(LONG_DRAIN_SECONDS),
    }
    process = run(standin, env, "--allow-writable-root", **as_runtime_user())
    try:
        wait_for(lambda: serving(process, port), "the stand-in to serve", timeout=10)
        yield port, process
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate(timeout=EXIT_TIMEOUT_SECONDS)


def test_spools_an_upload_over_1_mib_to_tmpdir_and_removes_it(
    serving_standin: tuple[int, subprocess.Popen[str]], scratch: Path
) -> None:
    port, _ = serving_standin
    url = f"http://127.0.0.1:{port}"
    small = upload(url, 1024 * 1024)  # at the threshold: kept in memory
    assert small == (200, {"model": "whisper-1", "file": file_answer(1024 * 1024, "")})

    held = Upload(url, 2 * MB)
    held.start()
    wait_for(lambda: spooled(scratch), "the upload's file spooled to TMPDIR", timeout=10)
    assert len(list(scratch.iterdir())) == 1
    assert held.finish() == (200, {"model": "whisper-1", "file": file_answer(2 * MB, scratch)})
    assert list(scratch.iterdir()) == [], "the spooled file is removed with its request"


def spooled(scratch: Path) -> bool:
    """Whether a file of more than 1 MiB is in `scratch`: one upload rolled over to disk."""
    return any(f.stat().st_size > 1024 * 1024 for f in scratch.iterdir())


def file_answer(size: int, spooled_to: Path | str) -> dict[str, Any]:
    return {"filename": "speech.wav", "bytes": size, "spooledTo": str(spooled_to)}


def test_a_missing_field_is_refused_as_the_framework_refuses_it(
    serving_standin: tuple[int, subprocess.Popen[str]],
) -> None:
    port, _ = serving_standin
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/v1/audio/transcriptions", data=b"{}", method="POST"
    )
    request.add_header("Content-Type", "application/json")
    with pytest.raises(urllib.error.HTTPError) as refused_request:
        urllib.request.urlopen(request, timeout=5)
    assert refused_request.value.code == 422


def test_on_sigterm_it_refuses_new_connections_finishes_the_request_in_flight_and_exits(
    serving_standin: tuple[int, subprocess.Popen[str]], scratch: Path
) -> None:
    """uvicorn's shape: the listener closes at once; the drain period only bounds the
    requests in flight, and the process exits as soon as none is left."""
    port, process = serving_standin
    assert get(port, c.LIVE_PATH) == (200, {"status": "live"})
    assert get(port, c.READY_PATH) == (200, {"status": "ready"})
    in_flight = Upload(f"http://127.0.0.1:{port}", 2 * MB)
    in_flight.start()
    wait_for(lambda: spooled(scratch), "the upload in flight", timeout=10)

    process.send_signal(signal.SIGTERM)
    wait_for(lambda: not listening(port), "the listener to close", timeout=LISTENER_CLOSE_SECONDS)
    assert refused(port), "a new connection was not refused"
    assert process.poll() is None, "exited with a request in flight"
    assert in_flight.finish() == (200, {"model": "whisper-1", "file": file_answer(2 * MB, scratch)})
    _, stderr = process.communicate(timeout=EXIT_TIMEOUT_SECONDS)  # not the 600 s drain
    assert process.returncode == 0, stderr
    assert (
        f"listener closed; waiting up to {LONG_DRAIN_SECONDS}s for 1 request(s) in flight" in stderr
    )
    assert "no request in flight after" in stderr


def test_a_request_still_running_when_the_drain_period_ends_is_cut_off(
    standin: Path, scratch: Path
) -> None:
    port, drain = free_port(), 1
    env = local(rendered_environment("runtime.yaml"), port) | {
        "TMPDIR": str(scratch),
        c.ENV_GRACEFUL_SHUTDOWN: str(drain),
    }
    process = run(standin, env, "--allow-writable-root", **as_runtime_user())
    wait_for(lambda: serving(process, port), "the stand-in to serve", timeout=10)
    stuck = Upload(f"http://127.0.0.1:{port}", 2 * MB)
    stuck.start()
    wait_for(lambda: spooled(scratch), "the upload in flight", timeout=10)
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=drain + EXIT_TIMEOUT_SECONDS)
    assert process.returncode == 0, stderr
    assert "1 request(s) still in flight after" in stderr
    assert "(drain period 1s): closing them" in stderr
    with pytest.raises(ConnectionError):  # the connection was closed under it
        stuck.finish()
    assert list(scratch.iterdir()) == []


def test_without_a_usable_tmpdir_it_falls_back_as_python_does(standin: Path) -> None:
    """tempfile.gettempdir() skips a TMPDIR it cannot write to and tries /tmp next."""
    port = free_port()
    env = local(rendered_environment("runtime.yaml"), port) | {"TMPDIR": "/nonexistent"}
    process = run(standin, env, "--allow-writable-root", **as_runtime_user())
    try:
        wait_for(lambda: serving(process, port), "the stand-in to serve", timeout=10)
        answer = upload(f"http://127.0.0.1:{port}", 2 * MB)
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=EXIT_TIMEOUT_SECONDS)
    assert answer == (200, {"model": "whisper-1", "file": file_answer(2 * MB, "/tmp")})
    assert "uploads over 1 MiB spool to /tmp" in stderr
