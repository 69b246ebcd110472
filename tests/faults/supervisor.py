"""A controller process restarted whenever it exits, as a pod's `restartPolicy: Always`
would restart it (without the kubelet's back-off, so tests stay short)."""

import threading
from pathlib import Path

from devcluster import ControlPlane
from devcluster.controller_harness import Controller

POLL_SECONDS = 0.2


class Supervised:
    def __init__(self, plane: ControlPlane, log: Path, *args: str, identity: str) -> None:
        self._plane, self._log, self._args, self.identity = plane, log, args, identity
        self.controller = self._start()
        self.exits: list[int] = []
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._restart_on_exit, daemon=True)
        self._thread.start()

    def _start(self) -> Controller:
        return Controller(self._plane, self._log, *self._args, identity=self.identity)

    def _restart_on_exit(self) -> None:
        while not self._stopping.wait(POLL_SECONDS):
            code = self.controller.process.poll()
            if code is not None:
                self.exits.append(code)
                self.controller = self._start()

    def stop(self) -> int:
        """Stop supervising, then SIGTERM the current process; its exit code."""
        self._stopping.set()
        self._thread.join()
        return self.controller.stop()
