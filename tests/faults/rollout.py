"""Many runtimes at once, and the check that each ended exactly as without a fault.

"Exactly as without the fault" means, for every runtime:
- status: the spec's generation observed, the image rolled out, and the
  conditions of a healthy runtime;
- objects: every managed object exists, controlled by the runtime, and holds
  every field the operator renders for it (common.render, the same function
  the controller uses; server defaults and others' fields may be added);
- events: no Warning; the upgrade announced exactly once per upgrade
  (Started, Completed); RuntimeReady exactly once after a provisioning,
  and during an upgrade (where readiness can dip while pods are replaced,
  as it does without faults) never twice without a RuntimeProgressing in
  between; no two consecutive Events with the same reason and note. A
  replayed stale object (a Deployment back at its creation) shows as an
  extra Progressing-then-Ready pair, which the provisioning count catches.
"""

import itertools
import json
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from devcluster import ControlPlane
from devcluster.controller_harness import IMAGE, Obj, managed_kinds_of, runtime_manifest
from trussium_operator.common.api import TrussiumRuntime
from trussium_operator.common.defaulting import apply_defaults
from trussium_operator.controller.runtime.kinds import MANAGED_KINDS, render_managed_objects

# kubectl's resource name of each kind a plain runtime gets, from the kind registry.
KINDS = {
    kind.kind: ".".join(
        filter(None, (kind.resource.plural, kind.resource.api_version.rpartition("/")[0]))
    )
    for kind in MANAGED_KINDS
    if kind.kind in managed_kinds_of(runtime_manifest("plain", "default"))
}
HEALTHY = {
    "Ready": ("True", "RuntimeReady"),
    "Degraded": ("False", "AsExpected"),
    "ConfigurationValid": ("True", "ReferencesResolved"),
    "Upgrading": ("False", "NoUpgrade"),
}
UPGRADED = HEALTHY | {"Upgrading": ("False", "UpgradeComplete")}


def image(tag: str) -> str:
    return f"{IMAGE}:{tag}"


def names(count: int) -> list[str]:
    return [f"rt-{i:03d}" for i in range(count)]


def apply_runtimes(plane: ControlPlane, namespace: str, count: int, tag: str) -> list[str]:
    """Create (or update to `tag`) `count` runtimes in one server-side apply."""
    items = [
        runtime_manifest(name, namespace, image={"repository": IMAGE, "tag": tag})
        for name in names(count)
    ]
    manifest = {"apiVersion": "v1", "kind": "List", "items": items}
    plane.kubectl(
        "apply",
        "--server-side",
        "--field-manager=test",
        "-f",
        "-",
        input=json.dumps(manifest),
        timeout=300,
    )
    return names(count)


def _list(plane: ControlPlane, resource: str, namespace: str) -> dict[str, Obj]:
    answer = plane.kubectl("get", resource, "-n", namespace, "-o", "json", timeout=120)
    return {item["metadata"]["name"]: item for item in json.loads(answer.stdout)["items"]}


def ready_count(plane: ControlPlane, namespace: str, tag: str) -> int:
    runtimes = _list(plane, "trussiumruntimes", namespace).values()
    return sum(_status_problem(r, image(tag), HEALTHY) is None for r in runtimes)


def _status_problem(
    runtime: Obj, wanted: str, conditions: dict[str, tuple[str, str]]
) -> str | None:
    status = runtime.get("status") or {}
    if status.get("observedGeneration") != runtime["metadata"].get("generation"):
        return "generation not observed"
    if status.get("currentImage") != wanted or status.get("lastSuccessfulImage") != wanted:
        return f"images {status.get('currentImage')}/{status.get('lastSuccessfulImage')}"
    seen = {c["type"]: (c["status"], c["reason"]) for c in status.get("conditions") or ()}
    wrong = {t: seen.get(t) for t, want in conditions.items() if seen.get(t) != want}
    return f"conditions {wrong}" if wrong else None


def _contains(live: Any, rendered: Any) -> bool:
    """Every rendered field is in `live` with the same value (lists element by element)."""
    if isinstance(rendered, dict):
        return isinstance(live, dict) and all(
            k in live and _contains(live[k], v) for k, v in rendered.items()
        )
    if isinstance(rendered, list):
        return (
            isinstance(live, list)
            and len(live) == len(rendered)
            and all(_contains(a, b) for a, b in zip(live, rendered, strict=True))
        )
    return bool(live == rendered)


@dataclass
class Report:
    problems: dict[str, str] = field(default_factory=dict)
    events: Counter[str] = field(default_factory=Counter)

    def summary(self) -> str:
        counted = ", ".join(f"{reason}={n}" for reason, n in sorted(self.events.items()))
        return f"events: {counted}"


def check(
    plane: ControlPlane, namespace: str, wanted: list[str], tag: str, upgrades: int
) -> Report:
    """Each runtime of `wanted` against the fault-free end state (module docstring)."""
    report = Report()
    runtimes = _list(plane, "trussiumruntimes", namespace)
    objects = {kind: _list(plane, resource, namespace) for kind, resource in KINDS.items()}
    answer = plane.kubectl("get", "events.v1.events.k8s.io", "-n", namespace, "-o", "json")
    events: dict[str, list[Obj]] = {}
    for event in json.loads(answer.stdout)["items"]:
        if event.get("reportingController") == "trussium-operator":
            events.setdefault(event["regarding"]["name"], []).append(event)
    for name in wanted:
        problem = _runtime_problem(
            runtimes.get(name), objects, events.get(name, []), tag, upgrades, report
        )
        if problem:
            report.problems[name] = problem
    return report


def _runtime_problem(
    runtime: Obj | None,
    objects: dict[str, dict[str, Obj]],
    events: list[Obj],
    tag: str,
    upgrades: int,
    report: Report,
) -> str | None:
    if runtime is None:
        return "missing"
    problem = _status_problem(runtime, image(tag), UPGRADED if upgrades else HEALTHY)
    if problem:
        return problem
    name, uid = runtime["metadata"]["name"], runtime["metadata"]["uid"]
    typed = TrussiumRuntime.model_validate(apply_defaults(runtime).object)
    for rendered in render_managed_objects(typed, objects["Deployment"].get(name)):
        live = objects[rendered["kind"]].get(name)
        if live is None:
            return f"{rendered['kind']} missing"
        owners = [r for r in live["metadata"].get("ownerReferences") or () if r.get("controller")]
        if [r.get("uid") for r in owners] != [uid]:
            return f"{rendered['kind']} not controlled by the runtime"
        for part in ("data", "spec", "automountServiceAccountToken"):
            if part in rendered and not _contains(live.get(part), rendered[part]):
                return f"{rendered['kind']} {part} differs from the rendering"
        if not _contains(live["metadata"].get("labels"), rendered["metadata"].get("labels")):
            return f"{rendered['kind']} labels differ from the rendering"
    ordered = sorted(events, key=lambda e: str(e.get("eventTime")))
    reasons = [e["reason"] for e in ordered]
    report.events.update(reasons)
    expected = {"RuntimeUpgradeStarted": upgrades, "RuntimeUpgradeCompleted": upgrades}
    if not upgrades:
        expected["RuntimeReady"] = 1
    counted = {reason: reasons.count(reason) for reason in expected}
    if counted != expected:
        return f"events {counted}, expected {expected}: {reasons}"
    readiness = [r for r in reasons if r in ("RuntimeReady", "RuntimeProgressing")]
    if ("RuntimeReady", "RuntimeReady") in itertools.pairwise(readiness):
        return f"RuntimeReady twice without progress in between: {reasons}"
    if any(e["type"] != "Normal" for e in ordered):
        return f"a Warning event: {reasons}"
    pairs = [(e["reason"], e.get("note")) for e in ordered]
    if any(a == b for a, b in itertools.pairwise(pairs)):
        return f"a transition announced twice: {reasons}"
    return None


def wait_converged(
    plane: ControlPlane,
    namespace: str,
    wanted: list[str],
    tag: str,
    *,
    upgrades: int = 0,
    timeout: float = 300.0,
) -> tuple[float, Report]:
    """Seconds until every runtime passes `check`; fails with the problems left."""
    started = time.monotonic()
    deadline = started + timeout
    while True:
        report = check(plane, namespace, wanted, tag, upgrades)
        if not report.problems:
            return time.monotonic() - started, report
        if time.monotonic() > deadline:
            sample = dict(list(report.problems.items())[:10])
            raise AssertionError(
                f"{len(report.problems)} of {len(wanted)} runtimes did not converge: {sample}"
            )
        time.sleep(2.0)
