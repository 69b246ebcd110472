"""The kubelet's part for a webhook that runs on the host: a Secret volume.

In a cluster the kubelet projects the serving Secret's `tls.crt` and
`tls.key` into the webhook pod and refreshes them when the Secret changes
(within about a minute); the webhook's ServiceAccount never reads it. On the
host this thread does the same with the admin's credentials, polling every
`interval` seconds, so the webhook runs with exactly the chart's RBAC.
`sync()` copies once, now, for tests that decide when a pod sees a change.
"""

import base64
import json
import threading
from pathlib import Path
from typing import Self

from devcluster.controlplane import ControlPlane
from trussium_operator.certs.files import BundleFiles, write_bundle

PROJECTED = ("tls.crt", "tls.key")  # the chart's `items`: never the CA key


class SecretMount:
    def __init__(
        self,
        plane: ControlPlane,
        namespace: str,
        name: str,
        directory: Path,
        *,
        interval: float = 1.0,
    ) -> None:
        self.plane = plane
        self.namespace = namespace
        self.name = name
        self.directory = directory
        self.interval = interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        directory.mkdir(parents=True, exist_ok=True)

    def sync(self) -> bool:
        """Copy the Secret's projected keys into the folder; False while it is incomplete."""
        answer = self.plane.kubectl(
            "get", "secret", self.name, "-n", self.namespace, "-o", "json", check=False
        )
        if answer.returncode:
            return False
        data = json.loads(answer.stdout).get("data") or {}
        if not all(data.get(key) for key in PROJECTED):
            return False
        certificate, key = (base64.b64decode(data[name]) for name in PROJECTED)
        write_bundle(self.directory, BundleFiles(certificate, key))
        return True

    def start(self) -> Self:
        self._thread = threading.Thread(target=self._run, name=f"mount-{self.name}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sync()
            self._stop.wait(self.interval)
