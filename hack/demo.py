"""`make demo`: the operator on a local control plane, narrated step by step.

Starts the cluster profile of the local control plane, installs the CRD, runs
the webhook and the controller as host processes with the chart's RBAC and a
self-managed CA, then walks through provisioning, an upgrade, an admission
rejection and a render preview. Afterwards it stays up for `kubectl` until
Ctrl-C; with `--once` it stops instead and exits 0 only if every step
behaved as expected.

With `TRUSSIUM_CLUSTER=kubeconfig` it uses the cluster of `$KUBECONFIG`
instead: the chart installs the operator there (hack/demo_release.py), the
same steps run, and on leaving it removes what it created except the CRD.
"""

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from devcluster import ControlPlane, Profile, polling
from devcluster.external import ClusterChoiceError, ExternalCluster, chosen_kubeconfig
from devcluster.hostoperator import HostOperator, install_crds
from hack.demo_release import ChartRelease

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"
NAMESPACE = "demo"
RUNTIME = "assistant"
UPGRADE_TAG = "0.9.1"
WAIT_SECONDS = 180.0

T = TypeVar("T")
Obj = dict[str, Any]


class DemoStepError(Exception):
    """A step did not behave as the demo promises."""


class Narrator:
    def __init__(self, steps: int) -> None:
        self._steps = steps
        self._done = 0
        self._began = time.monotonic()

    def step(self, title: str) -> None:
        self._done += 1
        elapsed = time.monotonic() - self._began
        print(f"\n\033[1m== [{self._done}/{self._steps}] {title}\033[0m  (+{elapsed:.0f}s)")

    def say(self, text: str) -> None:
        print(f"   {text}", flush=True)

    def show(self, text: str) -> None:
        for line in text.rstrip().splitlines():
            print(f"   | {line}")
        sys.stdout.flush()


def wait_for(check: Callable[[], T | None], what: str, timeout: float = WAIT_SECONDS) -> T:
    try:
        return polling.wait_for(check, what, timeout)
    except polling.WaitTimeoutError as error:
        raise DemoStepError(str(error)) from error


class Demo:
    def __init__(self, plane: ControlPlane, narrator: Narrator) -> None:
        self.plane = plane
        self.say = narrator

    def kubectl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return self.plane.kubectl(*args, check=check)

    def runtime(self) -> Obj:
        out = self.kubectl("get", "truntime", RUNTIME, "-n", NAMESPACE, "-o", "json")
        result: Obj = json.loads(out.stdout)
        return result

    def condition(self, type_: str) -> tuple[str, str]:
        for condition in self.runtime().get("status", {}).get("conditions", []):
            if condition["type"] == type_:
                return condition["status"], condition["reason"]
        return "", ""

    def show_runtime(self) -> None:
        self.say.show(self.kubectl("get", "truntime", "-n", NAMESPACE).stdout)
        status = self.runtime().get("status", {})
        rows = [
            f"{c['type']:<19} {c['status']:<6} {c['reason']:<24} {c.get('message', '')}"
            for c in status.get("conditions", [])
        ]
        self.say.show("\n".join(rows))
        self.say.say(f"lastSuccessfulImage: {status.get('lastSuccessfulImage', '')}")
        self.say.say(f"endpoint:            {status.get('endpoint', '')}")

    def event_reasons(self) -> list[str]:
        out = self.kubectl(
            "get", "events.events.k8s.io", "-n", NAMESPACE, "-o", "json",
            f"--field-selector=regarding.kind=TrussiumRuntime,regarding.name={RUNTIME}",
        )  # fmt: skip
        items = sorted(json.loads(out.stdout)["items"], key=lambda e: e["metadata"]["name"])
        items.sort(key=lambda e: e.get("eventTime") or "")
        return [e["reason"] for e in items]

    def show_events(self) -> None:
        self.say.show(
            self.kubectl("events", "-n", NAMESPACE, "--for", f"trussiumruntime/{RUNTIME}").stdout
        )

    # --- the scenario -----------------------------------------------------

    def provision(self) -> None:
        self.kubectl("create", "namespace", NAMESPACE)
        self.kubectl("apply", "-n", NAMESPACE, "-f", str(EXAMPLES / "runtime.yaml"))
        self.say.say(f"applied {EXAMPLES.relative_to(REPO)}/runtime.yaml; waiting for Ready=True")
        wait_for(lambda: self.condition("Ready") == ("True", "RuntimeReady"), "Ready=True")
        self.show_runtime()
        upgrading = self.condition("Upgrading")
        if upgrading != ("False", "NoUpgrade"):
            raise DemoStepError(f"initial provisioning should be NoUpgrade, got {upgrading}")
        self.show_events()

    def upgrade(self) -> None:
        patch = json.dumps({"spec": {"image": {"tag": UPGRADE_TAG}}})
        self.kubectl("patch", "truntime", RUNTIME, "-n", NAMESPACE, "--type=merge", "-p", patch)
        self.say.say(f"spec.image.tag -> {UPGRADE_TAG}; watching the Upgrading condition")
        seen: list[tuple[str, str]] = []

        def complete() -> bool:
            state = self.condition("Upgrading")
            if state[1] and (not seen or seen[-1] != state):
                seen.append(state)
                self.say.say(f"Upgrading={state[0]} reason={state[1]}")
            return state == ("False", "UpgradeComplete")

        wait_for(complete, "Upgrading=False UpgradeComplete")
        reasons = self.event_reasons()
        for expected in ("RuntimeUpgradeStarted", "RuntimeUpgradeCompleted"):
            if expected not in reasons:
                raise DemoStepError(f"expected event {expected}, got {reasons}")
        self.show_runtime()
        self.show_events()

    def reject_invalid(self) -> None:
        path = EXAMPLES / "invalid-runtime.yaml"
        result = self.kubectl("apply", "-n", NAMESPACE, "-f", str(path), check=False)
        self.say.say(f"kubectl apply -f {path.relative_to(REPO)}  -> exit {result.returncode}")
        self.say.show(result.stderr)
        if result.returncode == 0:
            raise DemoStepError("the invalid runtime was accepted")
        missing = [
            field
            for field in ("spec.provider.baseURL", "spec.podMetadata.labels", "spec.autoscaling")
            if field not in result.stderr
        ]
        if missing:
            raise DemoStepError(f"rejection did not name {missing}")

    def preview(self) -> None:
        path = EXAMPLES / "runtime-production.yaml"
        render = subprocess.run(
            [str(Path(sys.executable).parent / "trussium-controller"), "render", "-f", str(path)],
            capture_output=True,
            text=True,
            check=False,
        )
        if render.returncode != 0:
            raise DemoStepError(f"render failed: {render.stderr}")
        kinds = [
            line.split(":", 1)[1].strip()
            for line in render.stdout.splitlines()
            if line.startswith("kind:")
        ]
        self.say.say(f"trussium-controller render -f {path.relative_to(REPO)}")
        self.say.say(f"would apply: {', '.join(kinds)}")
        self.say.show("\n".join(render.stdout.splitlines()[:24]) + "\n...")


def hold(plane: ControlPlane, operator: HostOperator) -> None:
    print("\n\033[1mThe local control plane is up. Try it:\033[0m")
    print(f"  export KUBECONFIG={plane.kubeconfig} PATH={plane.bin_dir}:$PATH")
    print(f"  kubectl get truntime -A -o wide; kubectl events -n {NAMESPACE}")
    print(f"  kubectl apply -n {NAMESPACE} -f examples/secrets.yaml")
    print(f"  kubectl apply -n {NAMESPACE} -f examples/runtime-production.yaml")
    print(f"  logs: {', '.join(str(p) for p in operator.logs.values())}")
    print("Press Ctrl-C to stop everything.", flush=True)
    while plane.exited_component() is None:
        time.sleep(1)


def run_scenario(demo: Demo, say: Narrator) -> None:
    say.step("Provisioning a runtime")
    demo.provision()
    say.step(f"Upgrading its image to {UPGRADE_TAG}")
    demo.upgrade()
    say.step("Applying an invalid runtime: the webhook rejects it")
    demo.reject_invalid()
    say.step("Previewing what the operator would create")
    demo.preview()
    print("\n\033[1mEvery step behaved as expected.\033[0m", flush=True)


def on_local_plane(once: bool) -> None:
    say = Narrator(steps=7)
    say.step("Starting the local control plane (etcd, apiserver, controllers, kwok nodes)")
    with ControlPlane(Profile.CLUSTER) as plane:
        say.say(f"API server {plane.server}; kubeconfig {plane.kubeconfig}")
        say.step("Installing the TrussiumRuntime CRD")
        install_crds(plane)
        say.step("Starting the webhook and the controller (chart RBAC, self-managed CA)")
        with HostOperator(plane) as operator:
            say.say(f"webhook {operator.webhook_url}, controller leader-elected")
            run_scenario(Demo(plane, say), say)
            if not once:
                hold(plane, operator)


def on_given_cluster(kubeconfig: Path, once: bool) -> None:
    say = Narrator(steps=6)
    say.step(f"Reaching the cluster of {kubeconfig} (TRUSSIUM_CLUSTER=kubeconfig)")
    with ExternalCluster(kubeconfig) as cluster:
        say.say(f"API server {cluster.server}")
        say.step("Installing the operator with its chart (CRD, RBAC, webhook, controller)")
        with ChartRelease(cluster) as release:
            say.say(f"release in namespace {release.namespace}, image {release.image()}")
            try:
                run_scenario(Demo(cluster, say), say)
                if not once:
                    print(f"\n\033[1mThe operator runs in {cluster.server}. Try it:\033[0m")
                    print(f"  kubectl get truntime -A -o wide; kubectl events -n {NAMESPACE}")
                    print(f"  logs: {release.logs_hint()}")
                    print("Press Ctrl-C to remove what the demo created (the CRD stays).")
                    while True:
                        time.sleep(1)
            finally:
                # Before the operator goes: its runtimes' objects are deleted with them.
                cluster.kubectl(
                    "delete", "namespace", NAMESPACE, "--ignore-not-found", "--timeout=120s",
                    check=False,
                )  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make demo", description=__doc__)
    parser.add_argument("--once", action="store_true", help="run the scenario, then stop")
    args = parser.parse_args(argv)
    try:
        given = chosen_kubeconfig()
    except ClusterChoiceError as error:
        print(f"demo: {error}", file=sys.stderr)
        return 2
    try:
        if given is None:
            on_local_plane(args.once)
        else:
            on_given_cluster(given, args.once)
    except KeyboardInterrupt:
        print("\nstopped; nothing left running.")
        return 0
    except (
        DemoStepError,
        polling.WaitTimeoutError,
        subprocess.CalledProcessError,
        RuntimeError,
    ) as error:
        detail = getattr(error, "stderr", "") or ""
        print(f"\ndemo failed: {error}\n{detail}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
