"""The harness's one poll loop (devcluster.polling): returns what the check found, or fails
naming what it waited for and the last value seen."""

import pytest

from devcluster.polling import WaitTimeoutError, wait_for


def test_returns_the_first_truthy_value() -> None:
    answers = iter([None, 0, "", "ready"])
    assert wait_for(lambda: next(answers), "an answer", timeout=5, interval=0) == "ready"


def test_a_timeout_names_what_and_the_last_value_after_checking_once() -> None:
    calls: list[int] = []

    def check() -> int:
        calls.append(1)
        return 0

    with pytest.raises(WaitTimeoutError, match=r"waiting for the rollout \(last: 0\)"):
        wait_for(check, "the rollout", timeout=0)
    assert calls == [1]
