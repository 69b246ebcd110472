"""The quiescence barrier holds off while the controller has work queued, running, or
reconciles between two scrapes; it lets go only when all three are still."""

from collections.abc import Callable, Iterator

import pytest

from devcluster.barriers import progress, wait_quiescent


def scrape(depth: int, active: int, successes: int, errors: int = 0) -> str:
    return "\n".join(
        [
            f'workqueue_depth{{name="trussiumruntime"}} {depth}',
            'workqueue_depth{name="other"} 7',
            f'controller_runtime_active_workers{{controller="trussiumruntime"}} {active}',
            'controller_runtime_reconcile_total{controller="trussiumruntime",result="success"} '
            f"{successes}",
            'controller_runtime_reconcile_total{controller="trussiumruntime",result="error"} '
            f"{errors}",
            "",
        ]
    )


def scripted(*texts: str) -> Callable[[], str]:
    """Each scrape answers the next text; the last one repeats."""
    answers: Iterator[str] = iter(texts)
    last = [texts[-1]]

    def next_scrape() -> str:
        last[0] = next(answers, last[0])
        return last[0]

    return next_scrape


def test_progress_reads_this_controllers_queue_workers_and_reconcile_count() -> None:
    seen = progress(scrape(depth=2, active=1, successes=5, errors=3))
    assert (seen.queued, seen.running, seen.reconciles) == (2, 1, 8)


@pytest.mark.parametrize(
    "busy",
    [
        scrape(depth=1, active=0, successes=5),
        scrape(depth=0, active=1, successes=5),
    ],
)
def test_work_queued_or_running_holds_the_barrier(busy: str) -> None:
    with pytest.raises(AssertionError, match="not quiescent"):
        wait_quiescent(scripted(busy), interval=0.01, timeout=0.1)


def test_reconciles_between_scrapes_hold_the_barrier() -> None:
    moving = [scrape(depth=0, active=0, successes=n) for n in range(100)]
    with pytest.raises(AssertionError, match="not quiescent"):
        wait_quiescent(scripted(*moving), interval=0.01, timeout=0.1)


def test_the_barrier_lets_go_once_the_count_stops_moving() -> None:
    settling = [scrape(depth=1, active=1, successes=1), scrape(depth=0, active=0, successes=2)]
    wait_quiescent(scripted(*settling), interval=0.01, timeout=1.0)
