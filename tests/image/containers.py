"""Run an image's process in a real container with runc, confined like the pods
that run it: the image's own user, a read-only root filesystem, no
capabilities, no privilege escalation.

runc is the node profile's (hack/k8s/build-node.sh); the OCI runtime bundle
comes from the image tarball through umoci, whose config.json carries the
image config's user, environment and working directory.
"""

import copy
import json
import os
import secrets
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from devcluster.components import locate_node
from hack.image.oci import unpack

RUNC_TIMEOUT_SECONDS = 60
SCRATCH_MOUNT = {
    "destination": "/tmp",
    "type": "tmpfs",
    "source": "tmpfs",
    "options": ["nosuid", "nodev", "mode=1777", "size=64m"],
}


def runc() -> Path:
    if os.geteuid() != 0:
        pytest.skip("running containers with runc needs root")
    return locate_node() / "runc"


class Bundle:
    """An unpacked image; each run writes its own config.json from the image's."""

    def __init__(self, tarball: Path, directory: Path) -> None:
        self.path = directory / "bundle"
        self.state = directory / "state"
        self.runc = runc()
        unpack(tarball, self.path)
        self.image_config: dict[str, Any] = json.loads((self.path / "config.json").read_text())

    def _configure(
        self,
        args: Sequence[str] | None,
        env: Mapping[str, str],
        readonly: bool,
        uid: int | None,
        host_network: bool,
        scratch: bool,
    ) -> None:
        config = copy.deepcopy(self.image_config)
        process = config["process"]
        process["terminal"] = False
        if args is not None:
            process["args"] = list(args)
        process["env"] = [*process["env"], *(f"{k}={v}" for k, v in env.items())]
        if uid is not None:
            process["user"] = {"uid": uid, "gid": uid}
        process["capabilities"] = {kind: [] for kind in process["capabilities"]}
        process["noNewPrivileges"] = True
        config["root"]["readonly"] = readonly
        if scratch:  # what the operator's emptyDir gives the pod: a writable /tmp
            config["mounts"] = [*config["mounts"], SCRATCH_MOUNT]
        if host_network:
            namespaces = config["linux"]["namespaces"]
            config["linux"]["namespaces"] = [n for n in namespaces if n["type"] != "network"]
        (self.path / "config.json").write_text(json.dumps(config))

    def _argv(self, *args: str) -> list[str]:
        return [str(self.runc), "--root", str(self.state), *args]

    @contextmanager
    def start(
        self,
        args: Sequence[str] | None = None,
        env: Mapping[str, str] | None = None,
        readonly: bool = True,
        uid: int | None = None,
        host_network: bool = False,
        scratch: bool = False,
    ) -> Iterator[tuple[str, subprocess.Popen[str]]]:
        """`runc run` in the foreground; yields the container id and the process.
        With `scratch`, a tmpfs is mounted at /tmp."""
        self._configure(args, env or {}, readonly, uid, host_network, scratch)
        container = f"trussium-image-test-{secrets.token_hex(4)}"
        process = subprocess.Popen(
            self._argv("run", "--bundle", str(self.path), container),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            yield container, process
        finally:
            if process.poll() is None:
                process.kill()
            if process.stdout is not None and not process.stdout.closed:
                process.communicate(timeout=RUNC_TIMEOUT_SECONDS)
            process.wait(timeout=RUNC_TIMEOUT_SECONDS)
            subprocess.run(
                self._argv("delete", "--force", container),
                capture_output=True,
                timeout=RUNC_TIMEOUT_SECONDS,
                check=False,
            )

    def run(self, args: Sequence[str] | None, **options: Any) -> subprocess.CompletedProcess[str]:
        """Run to completion and return its exit code and output."""
        with self.start(args, **options) as (_, process):
            stdout, stderr = process.communicate(timeout=RUNC_TIMEOUT_SECONDS)
            return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)

    def signal(self, container: str, name: str) -> None:
        subprocess.run(
            self._argv("kill", container, name),
            check=True,
            capture_output=True,
            timeout=RUNC_TIMEOUT_SECONDS,
        )

    def status(self, container: str) -> str:
        result = subprocess.run(
            self._argv("state", container),
            capture_output=True,
            text=True,
            timeout=RUNC_TIMEOUT_SECONDS,
            check=False,
        )
        return str(json.loads(result.stdout)["status"]) if result.returncode == 0 else "absent"
