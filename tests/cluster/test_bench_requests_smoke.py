"""A short run of the request floor benchmark (`hack.bench_requests`), as documented:
each round sends a new runtime's requests, the controller's 14, and reads the
watch events they cause. No timing is asserted: the numbers are for people, on
a known load (docs/benchmarks.md, "The floor under the controller's CPU")."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

OWN_PLANE = pytest.mark.own_plane("a control plane of its own (the benchmark starts one)")
pytestmark = [pytest.mark.cluster, OWN_PLANE]


def test_a_short_run_sends_the_controllers_requests(tmp_path: Path) -> None:
    output = tmp_path / "requests.json"
    argv = [sys.executable, "-m", "hack.bench_requests", "--runtimes=10", "--rounds=1"]
    done = subprocess.run(
        [*argv, f"--output={output}"], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    results = json.loads(output.read_text())
    assert [r["loop"] for r in results["rounds"]] == ["uvloop", "asyncio"]
    for result in results["rounds"]:
        # Per runtime: an ownership GET and an apply of each of the 5 managed objects,
        # an Event and a status write for Progressing, then for Ready.
        assert result["requests_by_verb"] == {"GET": 50, "PATCH": 50, "POST": 20, "PUT": 20}
        # At least the runtime's ADDED, its 2 status writes and each object's ADDED.
        assert result["watch_events_per_runtime"] >= 8
        assert result["cpu_ms_per_runtime"] > 0
    assert set(results["medians"]) == {"uvloop", "asyncio"}
