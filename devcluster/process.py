"""One component process: started in its own process group with its output
in a log file, stopped by signalling the whole group so nothing it spawned
outlives it."""

import contextlib
import os
import signal
import subprocess
from collections.abc import Sequence
from pathlib import Path

TAIL_BLOCK = 256 * 1024


def tail(path: Path, lines: int) -> str:
    """The last `lines` lines of a (possibly huge) log file."""
    if not path.exists():
        return ""
    with path.open("rb") as handle:
        handle.seek(0, os.SEEK_END)
        handle.seek(max(0, handle.tell() - TAIL_BLOCK))
        text = handle.read().decode(errors="replace")
    return "\n".join(text.splitlines()[-lines:])


def _signal_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signum)


def group_alive(pgid: int) -> bool:
    """Whether any process is left in the process group."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


class Process:
    def __init__(self, name: str, argv: Sequence[str], log: Path, env: dict[str, str]) -> None:
        self.name = name
        self.argv = list(argv)
        self.log = log
        self._env = env
        self._popen: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        if self._popen is None:
            raise RuntimeError(f"{self.name} was never started")
        return self._popen.pid

    def start(self) -> None:
        """Start (or, once it exited, start again with the same command line and log)."""
        with self.log.open("ab") as log:
            # A new session makes the pid its process group id, and keeps the
            # terminal's Ctrl-C away from it: the harness decides the stop order.
            self._popen = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self._env,
                start_new_session=True,
            )

    def exit_code(self) -> int | None:
        """None while running (or never started)."""
        return None if self._popen is None else self._popen.poll()

    def terminate(self) -> None:
        self.send(signal.SIGTERM)

    def send(self, signum: int) -> None:
        """Signal the whole group (SIGSTOP/SIGCONT freeze and resume it)."""
        if self._popen is not None:
            _signal_group(self._popen.pid, signum)

    def kill(self, grace: float) -> None:
        """Wait up to `grace` seconds after `terminate`, then SIGKILL the group and reap."""
        if self._popen is None:
            return
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._popen.wait(timeout=grace)
        _signal_group(self._popen.pid, signal.SIGKILL)
        self._popen.wait()

    def describe_exit(self, lines: int) -> str:
        return (
            f"{self.name} exited with code {self.exit_code()}; last log lines ({self.log}):\n"
            + tail(self.log, lines)
        )
