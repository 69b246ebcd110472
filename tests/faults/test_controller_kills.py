"""SIGKILL of the controller at random points, 30 times during a provisioning rollout and
10 times during an upgrade: no Event lost or duplicated, every runtime ends as without
the kills."""

import os
import random
import signal
import time
from pathlib import Path

import pytest

from devcluster import ControlPlane
from devcluster.controller_harness import Controller, running_controller, scoped
from tests.faults.rollout import apply_runtimes, wait_converged

pytestmark = [pytest.mark.cluster, pytest.mark.faults]
KILLS = 30
RUNTIMES = 40
# Seeded, so a failure can be replayed with the same kill points.
SEED = int(os.environ.get("TRUSSIUM_FAULT_SEED", "15"))
# From just after the process starts (still importing or listing) to well into its work.
KILL_AFTER_SECONDS = (0.3, 4.0)


def _kill_repeatedly(
    plane: ControlPlane, log: Path, namespace: str, kills: int, rng: random.Random
) -> list[float]:
    points = []
    for _ in range(kills):
        controller = Controller(plane, log, *scoped(namespace), identity="a")
        point = rng.uniform(*KILL_AFTER_SECONDS)
        # The kill point itself is the random input: no outcome is read from this wait.
        time.sleep(point)
        controller.signal(signal.SIGKILL)
        controller.process.wait()
        points.append(point)
    return points


def test_controller_sigkilled_30_times_during_a_rollout(
    plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    rng = random.Random(SEED)
    log = tmp_path / "controller.log"
    started = time.monotonic()
    wanted = apply_runtimes(plane, namespace, RUNTIMES, "1.0.0")
    points = _kill_repeatedly(plane, log, namespace, KILLS, rng)
    with running_controller(plane, log, *scoped(namespace), identity="a"):
        seconds, report = wait_converged(plane, namespace, wanted, "1.0.0")
    assert report.events["RuntimeReady"] == RUNTIMES
    print(
        f"\nFAULT-RESULT controller-sigkill: {len(points)} kills (seed {SEED}, "
        f"{min(points):.1f}-{max(points):.1f}s after each start); converged in "
        f"{seconds:.1f}s after the last; {report.summary()} runtimes={RUNTIMES} "
        f"total={time.monotonic() - started:.0f}s"
    )


def test_controller_sigkilled_during_an_upgrade(
    plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    count, kills = 20, 10
    rng = random.Random(SEED)
    log = tmp_path / "controller.log"
    with running_controller(plane, log, *scoped(namespace), identity="a"):
        wanted = apply_runtimes(plane, namespace, count, "1.0.0")
        wait_converged(plane, namespace, wanted, "1.0.0")
    apply_runtimes(plane, namespace, count, "1.1.0")
    _kill_repeatedly(plane, log, namespace, kills, rng)
    with running_controller(plane, log, *scoped(namespace), identity="a"):
        seconds, report = wait_converged(plane, namespace, wanted, "1.1.0", upgrades=1)
    assert report.events["RuntimeUpgradeStarted"] == count
    assert report.events["RuntimeUpgradeCompleted"] == count
    print(
        f"\nFAULT-RESULT controller-sigkill-upgrade: {kills} kills (seed {SEED}); converged "
        f"in {seconds:.1f}s after the last; {report.summary()} runtimes={count}"
    )
