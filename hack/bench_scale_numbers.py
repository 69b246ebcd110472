"""The arithmetic of `hack.bench_scale`, apart from the cluster it measures.

Pairing each Deployment status change with the runtime status change that
shows it, percentiles, slopes, counting audit entries and comparing with a
baseline: pure functions and one small state machine, so they can be tested
without a control plane.
"""

import json
import statistics
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

# What a runtime's status copies from its Deployment's status (common/status.py).
Shown = tuple[int, int]
WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})


def replica_counts(obj: Mapping[str, Any] | None) -> Shown:
    """(readyReplicas, availableReplicas) of a Deployment's or a runtime's status."""
    status = (obj or {}).get("status") or {}
    return int(status.get("readyReplicas") or 0), int(status.get("availableReplicas") or 0)


@dataclass
class StatusLatency:
    """How long a runtime's status takes to show a change of its Deployment's status.

    Each Deployment change (while `recording`) waits until the runtime's status
    shows that state or a later one of the same Deployment: a runtime that jumps
    straight to the newest state has followed every change before it too. A
    change the runtime already shows when it arrives (the Deployment went back
    to it) needs nothing, and is counted apart as `already_shown`.
    """

    recording: bool = False
    samples: list[float] = field(default_factory=list)
    already_shown: int = 0
    _pending: dict[str, list[tuple[float, Shown]]] = field(default_factory=dict)
    _shown: dict[str, Shown] = field(default_factory=dict)

    def deployment_changed(self, key: str, state: Shown, at: float) -> None:
        if not self.recording:
            return
        if state == self._shown.get(key, (0, 0)):
            self.already_shown += 1 + len(self._pending.pop(key, []))
            return
        self._pending.setdefault(key, []).append((at, state))

    def runtime_changed(self, key: str, state: Shown, at: float) -> None:
        self._shown[key] = state
        pending = self._pending.get(key) or []
        matched = [i for i, (_, wanted) in enumerate(pending) if wanted == state]
        if matched:
            last = matched[-1]
            self.samples += [at - since for since, _ in pending[: last + 1]]
            del pending[: last + 1]

    @property
    def unpaired(self) -> int:
        """Changes the runtime has not shown (yet)."""
        return sum(len(pending) for pending in self._pending.values())

    def summary(self) -> dict[str, float | int | None]:
        milliseconds = [round(s * 1000, 1) for s in self.samples]
        return {
            "samples": len(milliseconds),
            "already_shown": self.already_shown,
            "unpaired": self.unpaired,
            **{f"p{q}_ms": percentile(milliseconds, q) for q in (50, 95, 99)},
            "max_ms": max(milliseconds) if milliseconds else None,
        }


def percentile(values: Sequence[float], q: int) -> float | None:
    """The q-th percentile (inclusive method); None without values."""
    if not values:
        return None
    if len(values) == 1:
        return values[0]
    return round(statistics.quantiles(values, n=100, method="inclusive")[q - 1], 1)


def slope(points: Sequence[tuple[float, float]]) -> float | None:
    """Least-squares slope of y over x; None unless x takes two values."""
    if len({x for x, _ in points}) < 2:
        return None
    return statistics.linear_regression([x for x, _ in points], [y for _, y in points]).slope


TROUBLE_LEVELS = frozenset({"warning", "error", "critical"})


def troubled_log_lines(lines: Iterable[str]) -> int:
    """Lines of the controller's JSON log at warning level or above (a line that is
    not JSON, such as a traceback's, counts too: only trouble prints those)."""
    count = 0
    for line in lines:
        if not line.strip():
            continue
        try:
            level = json.loads(line).get("level")
        except (ValueError, AttributeError):
            count += 1
            continue
        count += level in TROUBLE_LEVELS
    return count


def audit_files(audit_log: Path) -> list[Path]:
    """The audit log and the backups the API server rotated out of it, oldest first.

    With `--audit-log-maxsize` unset, the API server rotates its audit log at 100 MB
    (its log library's default) and keeps every backup as `audit-<timestamp>.log`, so
    a run that writes tens of thousands of objects has most of its entries in backups."""
    backups = sorted(audit_log.parent.glob(f"{audit_log.stem}-*{audit_log.suffix}"))
    return [*backups, audit_log]


def audit_time(entry: Mapping[str, Any]) -> float:
    stamp = str(entry["requestReceivedTimestamp"]).replace("Z", "+00:00")
    return datetime.fromisoformat(stamp).timestamp()


def request_counts(
    entries: Iterable[Mapping[str, Any]], since: float, until: float
) -> Counter[str]:
    """Requests by `verb:resource` received in [since, until), each counted once
    (a watch is logged when it starts and again when it ends)."""
    counts: Counter[str] = Counter()
    for entry in entries:
        if entry.get("verb") == "watch" and entry.get("stage") != "ResponseStarted":
            continue
        if since <= audit_time(entry) < until:
            resource = (entry.get("objectRef") or {}).get("resource", "?")
            counts[f"{entry.get('verb')}:{resource}"] += 1
    return counts


def writes_of(counts: Mapping[str, int], *, leases: bool) -> int:
    return sum(
        n
        for key, n in counts.items()
        if key.split(":")[0] in WRITE_VERBS and (leases or not key.endswith(":leases"))
    )


def per_unit(counts: Mapping[str, int], units: int) -> dict[str, float]:
    return {key: round(n / units, 2) for key, n in sorted(counts.items())} if units else {}


def flatten(value: Any, prefix: str = "") -> dict[str, float]:
    """Every number in nested dicts, keyed by its dotted path."""
    if isinstance(value, bool) or value is None:
        return {}
    if isinstance(value, int | float):
        return {prefix: float(value)}
    if isinstance(value, Mapping):
        found: dict[str, float] = {}
        for key, inner in value.items():
            found |= flatten(inner, f"{prefix}.{key}" if prefix else str(key))
        return found
    return {}


def step_key(step: Mapping[str, Any]) -> str:
    return f"N={step['runtimes']} M={step['unrelated']}"


def ratios(current: Mapping[str, Any], baseline: Mapping[str, Any]) -> list[tuple[str, float]]:
    """(what, current / baseline) for every number both runs measured at the same N and M;
    load averages are context, not results, so they are left out."""
    before = {step_key(s): flatten(s) for s in baseline.get("steps", [])}
    found = []
    for step in current.get("steps", []):
        old = before.get(step_key(step), {})
        for name, value in flatten(step).items():
            if ".load" in f".{name}" or name in ("runtimes", "unrelated"):
                continue
            if old.get(name):
                found.append((f"{step_key(step)} {name}", value / old[name]))
    return found
