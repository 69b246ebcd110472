"""`trussium-webhook validate` beside kubeconform, and beside another checkout's code,
on 1,000 TrussiumRuntime files.

Generates the files (the repository's examples and valid samples, renamed,
in turn), converts the chart's CRD schema to the JSON schema kubeconform
reads, builds kubeconform from the Go module proxy once into a cache (under
the Kubernetes build's lock: one Go build at a time; or takes --kubeconform)
and runs every command, offline, several rounds in alternation, each a cold
process as in CI. `--baseline DIR` adds DIR's code (another checkout, e.g.
of the previous release) run by this interpreter, so only the code differs.
Each command runs once untimed first, with its bytecode written to a cache
in the temporary folder (not into the checkouts): an installed wheel has
its modules compiled, so a timed run compiles none. Two floors run beside
them: importing the API models alone, and that plus libyaml's events of
every file, in one process: what any validator on this stack pays first.
Prints the median wall and CPU seconds of each (with the last line of its
report: an older checkout may fail files that use fields added since), the
ratios to kubeconform and to the baseline, the load average and the usable
cores: this machine is shared, so compare the ratios and quote the load
with any number.

    .venv/bin/python -m hack.bench_validate [--files 1000] [--rounds 7] [--baseline DIR]
        [--kubeconform PATH] [--output F]
"""

import argparse
import fcntl
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from hack.crd import CRD_PATH as CRD

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted(ROOT.glob("examples/runtime*.yaml")) + sorted(
    ROOT.glob("tests/samples/valid/*.yaml")
)
KUBECONFORM_MODULE = "github.com/yannh/kubeconform/cmd/kubeconform"
KUBECONFORM_VERSION = "v0.8.0"
BUILD_TIMEOUT_SECONDS = 1800.0
RUN_TIMEOUT_SECONDS = 300.0
# Every checkout's code is run by this interpreter, as a cold process.
VALIDATE = [sys.executable, "-m", "trussium_operator.webhook.cli", "validate"]
# Floors: what any validator built on this project's stack must do before its own work,
# in one process. The API's pydantic models (its one implementation of the rules) are
# built when imported; libyaml's events are the least a YAML read costs per file.
IMPORT_FLOOR = "import trussium_operator.common.api; print('imported the API models')"
EVENTS_FLOOR = """import pathlib, sys, yaml, trussium_operator.common.api
files = sorted(pathlib.Path(sys.argv[1]).glob("*.yaml"))
events = sum(1 for f in files for _ in yaml.parse(f.read_bytes(), Loader=yaml.CSafeLoader))
print(f"imported the API models, {events} YAML events in {len(files)} files")"""


def cache_root() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "trussium-operator"


def kubeconform() -> Path:
    """The pinned kubeconform, built on first use (CGO off, trimmed paths, niced)."""
    target = cache_root() / "kubeconform" / KUBECONFORM_VERSION
    binary = target / "kubeconform"
    if binary.exists():
        return binary
    target.mkdir(parents=True, exist_ok=True)
    lock_path = cache_root() / "k8s" / ".lock"  # hack/k8s/build.sh's: one Go build at a time
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with lock_path.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not binary.exists():
            print(f">> building kubeconform {KUBECONFORM_VERSION}", file=sys.stderr)
            environment = os.environ | {"GOBIN": str(target), "CGO_ENABLED": "0"}
            module = f"{KUBECONFORM_MODULE}@{KUBECONFORM_VERSION}"
            subprocess.run(
                ["nice", "-n", "10", "go", "install", "-trimpath", module],
                env=environment,
                check=True,
                timeout=BUILD_TIMEOUT_SECONDS,
            )
    return binary


def json_schema(folder: Path) -> str:
    """The CRD's served schema as kubeconform's file; returns its -schema-location template.

    No `$schema` key: kubeconform would fetch the draft's meta-schema from the network and,
    offline, report every file as an error without validating it."""
    crd = yaml.safe_load(CRD.read_text())
    kind = crd["spec"]["names"]["kind"].lower()
    for version in crd["spec"]["versions"]:
        schema = version["schema"]["openAPIV3Schema"]
        (folder / f"{kind}_{version['name']}.json").write_text(json.dumps(schema))
    return str(folder / "{{ .ResourceKind }}_{{ .ResourceAPIVersion }}.json")


def generate(folder: Path, count: int) -> None:
    runtimes = [
        document
        for source in SOURCES
        for document in yaml.safe_load_all(source.read_text())
        if document and document.get("kind") == "TrussiumRuntime"
    ]
    for i in range(count):
        document = runtimes[i % len(runtimes)]
        document["metadata"]["name"] = f"runtime-{i}"
        (folder / f"runtime-{i:04}.yaml").write_text(yaml.safe_dump(document, sort_keys=False))


def timed(argv: list[str], code: Path | None, bytecode: Path) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds of the process and its children, last output line);
    `code`: the checkout whose code Python runs (`-m` looks in the working folder first),
    its bytecode kept under `bytecode`."""
    env = None
    if code is not None:
        env = os.environ | {"PYTHONPATH": str(code), "PYTHONPYCACHEPREFIX": str(bytecode)}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_SECONDS,
        check=False,
        env=env,
        cwd=code,
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    # kubeconform's too: an error is no measurement. An older checkout may find the files
    # invalid (fields added since): it still read and checked them all, so exit 1 counts.
    if done.returncode not in ((0, 1) if code not in (None, ROOT) else (0,)):
        raise SystemExit(f"{argv[0]} exited {done.returncode}:\n{done.stdout}{done.stderr}")
    return wall, cpu, (done.stdout + done.stderr).strip().splitlines()[-1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument(
        "--baseline", type=Path, metavar="DIR", help="another checkout whose code to compare"
    )
    parser.add_argument("--kubeconform", type=Path, metavar="PATH", help="default: build it")
    parser.add_argument("--output", type=Path, help="save the numbers as JSON")
    args = parser.parse_args()
    args.baseline = args.baseline and args.baseline.resolve()
    if args.baseline and not (args.baseline / "trussium_operator").is_dir():
        raise SystemExit(f"--baseline {args.baseline}: not a checkout of this project")
    theirs = args.kubeconform or kubeconform()
    with tempfile.TemporaryDirectory(prefix="bench-validate-") as work:
        manifests, schemas = Path(work, "manifests"), Path(work, "schemas")
        bytecode = Path(work, "bytecode")
        manifests.mkdir()
        schemas.mkdir()
        generate(manifests, args.files)
        location = json_schema(schemas)
        # name -> (argv, PYTHONPATH: whose code; None for kubeconform)
        commands: dict[str, tuple[list[str], Path | None]] = {
            "trussium-webhook validate": ([*VALIDATE, str(manifests)], ROOT),
            "trussium-webhook validate --jobs 1": (
                [*VALIDATE, "--jobs", "1", str(manifests)],
                ROOT,
            ),
            "floor: import the API models": ([sys.executable, "-c", IMPORT_FLOOR], ROOT),
            "floor: and read libyaml's events": (
                [sys.executable, "-c", EVENTS_FLOOR, str(manifests)],
                ROOT,
            ),
            "kubeconform": (
                [str(theirs), "-schema-location", location, "-strict", "-summary", str(manifests)],
                None,
            ),
        }
        if args.baseline:
            commands["baseline: validate"] = ([*VALIDATE, str(manifests)], args.baseline)
            commands["baseline: validate --jobs 1"] = (
                [*VALIDATE, "--jobs", "1", str(manifests)],
                args.baseline,
            )
        for argv, code in commands.values():  # compiles the bytecode; not timed
            timed(argv, code, bytecode)
        load_before = os.getloadavg()
        samples: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
        summaries: dict[str, str] = {}
        for _ in range(args.rounds):
            for name, (argv, code) in commands.items():
                wall, cpu, summaries[name] = timed(argv, code, bytecode)
                samples[name].append((wall, cpu))
        load_after = os.getloadavg()
    results: dict[str, Any] = {
        name: {
            "wall_median_s": statistics.median(w for w, _ in runs),
            "cpu_median_s": statistics.median(c for _, c in runs),
            "summary": summaries[name],
        }
        for name, runs in samples.items()
    }
    reference = results["kubeconform"]["wall_median_s"]
    print(f"{args.files} files, {args.rounds} rounds, {len(os.sched_getaffinity(0))} usable cores")
    print(f"load average (1, 5, 15 min): before {load_before}, after {load_after}")
    print("median wall and CPU; wall ratio to kubeconform")
    for name, result in results.items():
        result["wall_ratio_to_kubeconform"] = result["wall_median_s"] / reference
        print(
            f"{name:38} wall {result['wall_median_s']:.3f} s  cpu {result['cpu_median_s']:.3f} s  "
            f"x{result['wall_ratio_to_kubeconform']:.2f}  | {result['summary']}"
        )
    for jobs in ("", " --jobs 1") if args.baseline else ():
        ours, before = (
            results[f"trussium-webhook validate{jobs}"],
            results[f"baseline: validate{jobs}"],
        )
        wall = ours["wall_ratio_baseline_to_this"] = before["wall_median_s"] / ours["wall_median_s"]
        cpu = ours["cpu_ratio_baseline_to_this"] = before["cpu_median_s"] / ours["cpu_median_s"]
        print(
            f"baseline / this checkout{jobs or ' (default jobs)'}: wall x{wall:.2f}, cpu x{cpu:.2f}"
        )
    if args.output:
        numbers = {"files": args.files, "rounds": args.rounds, "load": [load_before, load_after]}
        args.output.write_text(json.dumps(numbers | {"results": results}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
