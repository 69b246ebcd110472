"""Talking to the stand-in runtime: the environment the operator renders for
it, and its HTTP endpoints on a loopback port."""

import json
import os
import subprocess
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from trussium_operator.common import constants as c
from trussium_operator.common.api import TrussiumRuntime
from trussium_operator.common.defaulting import apply_defaults
from trussium_operator.common.render import config_data

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
API_KEY = "sk-standin-test-0123456789"
TCP_LISTEN = "0A"  # the state column of /proc/net/tcp for a listening socket


def example(name: str) -> dict[str, Any]:
    manifest: dict[str, Any] = yaml.safe_load((EXAMPLES / name).read_text())
    return manifest


def rendered_environment(example_or_manifest: str | dict[str, Any]) -> dict[str, str]:
    """The container environment the operator gives a runtime, an example's by default
    (its ConfigMap, plus API_KEY for each credentials Secret it references)."""
    manifest = example_or_manifest
    if isinstance(manifest, str):
        manifest = example(manifest)
    runtime = TrussiumRuntime.model_validate(apply_defaults(manifest).object)
    env = config_data(runtime.spec)
    if runtime.spec.provider.credentials_secret_ref is not None:
        env[c.API_KEY_ENV] = API_KEY
    if runtime.spec.reranking and runtime.spec.reranking.credentials_secret_ref is not None:
        env[c.RERANKING_API_KEY_ENV] = API_KEY
    return env


def local(env: Mapping[str, str], port: int) -> dict[str, str]:
    """Rendered env listening on loopback and a free port instead of 0.0.0.0:9000."""
    return {**env, c.ENV_HOST: "127.0.0.1", c.ENV_PORT: str(port)}


def get(port: int, path: str) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as error:
        return error.code, json.load(error)


def live(port: int) -> bool:
    try:
        return get(port, c.LIVE_PATH)[0] == 200
    except OSError:
        return False


def listening(port: int) -> bool:
    """Whether a socket listens on `port`, as the kernel's socket tables show it.

    Looking does not connect: a connection opened while the stand-in handles
    SIGTERM can land in its accept queue or be accepted a moment before the
    listener closes, and is then reset or closed unanswered (as uvicorn's
    would be), so a test waits on this instead of probing with connections.
    """
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            local_port = int(fields[1].rpartition(":")[2], 16)
            if fields[3] == TCP_LISTEN and local_port == port:
                return True
    return False


def refused(port: int) -> bool:
    """Whether a new connection is refused (the listener is closed)."""
    try:
        get(port, c.LIVE_PATH)
    except ConnectionRefusedError:
        return True
    except urllib.error.URLError as error:
        return isinstance(error.reason, ConnectionRefusedError)
    return False


def as_runtime_user() -> dict[str, Any]:
    """Popen arguments that drop root to the runtime's uid (nothing when not root)."""
    if os.geteuid() != 0:
        return {}
    return {"user": c.RUNTIME_UID, "group": c.RUNTIME_GID, "extra_groups": []}


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
