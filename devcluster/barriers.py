"""Barriers for tests: wait for a condition, or for a controller to have nothing left to do.

A test that asserts something did *not* happen waits for quiescence first,
never for a fixed time: the controller's own metrics say when every change
it has been told about has been handled. Quiescent means the work queue is
empty, no reconcile is running, and the reconcile count did not move
between two scrapes `interval` apart. Anything the controller was still
going to do shows in one of the three, so the barrier holds off, and the
assertion after it sees the outcome. (A retry waiting out its backoff
shows in none of them: assert on retries with a condition, not with this.)
"""

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from prometheus_client.parser import text_string_to_metric_families

from trussium_operator.controller.metrics import CONTROLLER, QUEUE

T = TypeVar("T")


@dataclass(frozen=True)
class Progress:
    """What one scrape of the controller's /metrics says about its work."""

    queued: float
    running: float
    reconciles: float


def progress(text: str) -> Progress:
    values = {"workqueue_depth": 0.0, "controller_runtime_active_workers": 0.0}
    reconciles = 0.0
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = sample.labels
            if sample.name in values and QUEUE in (labels.get("name"), labels.get("controller")):
                values[sample.name] = sample.value
            elif sample.name == "controller_runtime_reconcile_total":
                reconciles += sample.value if labels.get("controller") == CONTROLLER else 0.0
    return Progress(
        values["workqueue_depth"], values["controller_runtime_active_workers"], reconciles
    )


def quiescent(before: Progress, after: Progress) -> bool:
    idle = before.queued == before.running == after.queued == after.running == 0
    return idle and before.reconciles == after.reconciles


def wait_quiescent(scrape: Callable[[], str], interval: float = 1.0, timeout: float = 60.0) -> None:
    """Block until two scrapes `interval` apart show a quiescent controller."""
    before = progress(scrape())
    deadline = time.monotonic() + timeout
    while True:
        time.sleep(interval)
        after = progress(scrape())
        if quiescent(before, after):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"not quiescent after {timeout}s: {after}")
        before = after


async def until(check: Callable[[], T | None], what: str, seconds: float = 10.0) -> T:
    """Poll `check` on the running event loop until it returns something truthy."""
    deadline = time.monotonic() + seconds
    while not (result := check()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {seconds}s waiting for {what}")
        await asyncio.sleep(0.005)
    return result


async def until_quiescent(
    scrape: Callable[[], str], interval: float = 0.05, seconds: float = 10.0
) -> None:
    """`wait_quiescent` for a controller running on this event loop."""
    before = progress(scrape())
    deadline = time.monotonic() + seconds
    while True:
        await asyncio.sleep(interval)
        after = progress(scrape())
        if quiescent(before, after):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"not quiescent after {seconds}s: {after}")
        before = after
