"""The scale benchmark's arithmetic: pairing status changes, percentiles, slopes, counts."""

from pathlib import Path

from hack.bench_scale_numbers import (
    StatusLatency,
    audit_files,
    percentile,
    ratios,
    replica_counts,
    request_counts,
    slope,
    troubled_log_lines,
    writes_of,
)


def test_replica_counts_read_ready_and_available_with_absent_as_zero() -> None:
    assert replica_counts({"status": {"readyReplicas": 2, "availableReplicas": 1}}) == (2, 1)
    assert replica_counts({"status": {}}) == (0, 0)
    assert replica_counts(None) == (0, 0)


def test_a_deployment_change_is_timed_until_the_runtime_shows_it() -> None:
    latency = StatusLatency(recording=True)
    latency.runtime_changed("a", (1, 1), at=0.0)
    latency.deployment_changed("a", (2, 2), at=10.0)
    latency.runtime_changed("a", (1, 1), at=10.2)  # some other status field moved
    assert latency.unpaired == 1
    latency.runtime_changed("a", (2, 2), at=10.5)
    assert latency.samples == [0.5]
    assert latency.unpaired == 0


def test_a_runtime_that_jumps_to_the_newest_state_has_followed_each_change_before_it() -> None:
    latency = StatusLatency(recording=True)
    latency.deployment_changed("a", (2, 1), at=1.0)
    latency.deployment_changed("a", (2, 2), at=2.0)
    latency.runtime_changed("a", (2, 2), at=3.0)
    assert latency.samples == [2.0, 1.0]


def test_changes_of_other_runtimes_do_not_pair() -> None:
    latency = StatusLatency(recording=True)
    latency.deployment_changed("a", (1, 1), at=1.0)
    latency.runtime_changed("b", (1, 1), at=2.0)
    assert (latency.samples, latency.unpaired) == ([], 1)


def test_a_deployment_back_at_what_the_runtime_shows_needs_nothing() -> None:
    latency = StatusLatency(recording=True)
    latency.runtime_changed("a", (1, 1), at=0.0)
    latency.deployment_changed("a", (2, 2), at=1.0)
    latency.deployment_changed("a", (1, 1), at=1.1)
    assert (latency.samples, latency.unpaired, latency.already_shown) == ([], 0, 2)


def test_nothing_is_timed_while_not_recording_but_what_runtimes_show_is_kept() -> None:
    latency = StatusLatency()
    latency.deployment_changed("a", (1, 1), at=1.0)
    latency.runtime_changed("a", (1, 1), at=2.0)
    latency.recording = True
    latency.deployment_changed("a", (1, 1), at=3.0)
    assert (latency.samples, latency.unpaired, latency.already_shown) == ([], 0, 1)


def test_summary_gives_percentiles_in_milliseconds() -> None:
    latency = StatusLatency(samples=[i / 1000 for i in range(1, 101)])
    summary = latency.summary()
    assert summary["samples"] == 100
    assert summary["p50_ms"] == 50.5
    assert summary["p99_ms"] == 99.0
    assert summary["max_ms"] == 100.0
    assert StatusLatency().summary()["p95_ms"] is None


def test_percentile_of_one_value_is_that_value() -> None:
    assert percentile([7.0], 95) == 7.0
    assert percentile([], 95) is None


def test_slope_is_least_squares_and_needs_two_distinct_x() -> None:
    assert slope([(0, 100.0), (100, 140.0), (1000, 500.0)]) == 0.4
    assert slope([(100, 1.0), (100, 2.0)]) is None


def _entry(verb: str, resource: str, at: str, stage: str = "ResponseComplete") -> dict[str, object]:
    return {
        "verb": verb,
        "objectRef": {"resource": resource},
        "requestReceivedTimestamp": at,
        "stage": stage,
    }


def test_request_counts_count_a_watch_once_and_only_inside_the_window() -> None:
    entries = [
        _entry("patch", "deployments", "1970-01-01T00:00:10.000000Z"),
        _entry("watch", "secrets", "1970-01-01T00:00:11Z", stage="ResponseStarted"),
        _entry("watch", "secrets", "1970-01-01T00:00:11Z"),
        _entry("update", "leases", "1970-01-01T00:00:12Z"),
        _entry("patch", "deployments", "1970-01-01T00:00:20Z"),
    ]
    counts = request_counts(entries, since=10.0, until=20.0)
    assert counts == {"patch:deployments": 1, "watch:secrets": 1, "update:leases": 1}
    assert writes_of(counts, leases=True) == 2
    assert writes_of(counts, leases=False) == 1


def test_audit_files_are_the_rotated_backups_oldest_first_then_the_live_log(
    tmp_path: Path,
) -> None:
    names = [
        "audit.log",
        "audit-2026-12-01T16-40-02.117.log",
        "audit-2026-12-01T16-21-50.003.log",
        "audit-policy.yaml",
        "kube-apiserver.log",
    ]
    for name in names:
        (tmp_path / name).write_text("")
    assert [p.name for p in audit_files(tmp_path / "audit.log")] == [
        "audit-2026-12-01T16-21-50.003.log",
        "audit-2026-12-01T16-40-02.117.log",
        "audit.log",
    ]


def test_troubled_log_lines_are_warnings_errors_and_anything_not_json() -> None:
    lines = [
        '{"level": "info", "message": "status updated"}',
        '{"level": "warning", "message": "cannot post event"}',
        '{"level": "error", "message": "reconcile failed"}',
        "Traceback (most recent call last):",
        '"a JSON string, not a record"',
        "",
        '{"level": "debug", "message": "waiting for a Secret lookup"}',
    ]
    assert troubled_log_lines(lines) == 4


def test_ratios_compare_numbers_at_the_same_n_and_m_and_leave_load_out() -> None:
    old = {"steps": [{"runtimes": 100, "unrelated": 0, "ready_seconds": 20.0, "load": {"a": 1}}]}
    new = {
        "steps": [
            {"runtimes": 100, "unrelated": 0, "ready_seconds": 10.0, "load": {"a": 3}},
            {"runtimes": 1000, "unrelated": 0, "ready_seconds": 90.0},
        ]
    }
    assert ratios(new, old) == [("N=100 M=0 ready_seconds", 0.5)]
