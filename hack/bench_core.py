"""Per-call cost of the functional core on the production example.

Prints the median microseconds per call of defaulting, validation, rendering
and status computation (each over many repetitions, several rounds), so a
change to `common/` can be judged by numbers. `--output` saves them as JSON;
`--baseline FILE` prints each as a ratio to an earlier run (medians, because
this machine is shared and noisy).

    .venv/bin/python -m hack.bench_core --output /tmp/core.json
    .venv/bin/python -m hack.bench_core --baseline /tmp/core.json
"""

import argparse
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from trussium_operator.common.api import TrussiumRuntime
from trussium_operator.common.defaulting import apply_defaults
from trussium_operator.common.status import Outcome, compute_status
from trussium_operator.common.validation import validate_runtime
from trussium_operator.controller.runtime.kinds import render_managed_objects

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "runtime-production.yaml"
NOW = "2026-11-29T00:00:00Z"


def cases() -> dict[str, Callable[[], object]]:
    obj: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    obj["metadata"] |= {"namespace": "bench", "uid": "u", "generation": 1}
    defaulted = apply_defaults(obj).object
    runtime = TrussiumRuntime.model_validate(defaulted)
    deployment = render_managed_objects(runtime)[3]
    return {
        "apply_defaults": lambda: apply_defaults(obj),
        "validate_runtime": lambda: validate_runtime(defaulted),
        "validate_runtime_update": lambda: validate_runtime(defaulted, defaulted),
        "render_managed_objects": lambda: render_managed_objects(runtime),
        "compute_status": lambda: compute_status(
            runtime, deployment=deployment, service=None, outcome=Outcome(), now=NOW
        ),
    }


def median_microseconds(call: Callable[[], object], rounds: int, repeat: int) -> float:
    samples = []
    for _ in range(rounds):
        began = time.perf_counter()
        for _ in range(repeat):
            call()
        samples.append((time.perf_counter() - began) / repeat * 1e6)
    return statistics.median(samples)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument("--output", type=Path)
    parser.add_argument("--baseline", type=Path)
    args = parser.parse_args(argv)
    baseline = json.loads(args.baseline.read_text()) if args.baseline else {}
    results = {}
    for name, call in cases().items():
        call()  # warm caches
        results[name] = median_microseconds(call, args.rounds, args.repeat)
        ratio = f"  x{results[name] / baseline[name]:.2f} vs baseline" if name in baseline else ""
        print(f"{name:<26} {results[name]:9.1f} us/call (median of {args.rounds}){ratio}")
    if args.output:
        args.output.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
