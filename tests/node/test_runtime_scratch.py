"""The runtime's scratch space and shutdown on a real node: uploads over 1 MiB land
in the pod's emptyDir and nowhere else, the Go operator's template (no scratch
space) fails them as the real runtime does, and a deleted pod shuts down the way
the runtime's uvicorn does (docs/contract.md section 4.5, ADR 0019).

Clients run inside the node's network namespace and reach pods by their IP."""

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from devcluster import ControlPlane
from devcluster.controller_harness import (
    Obj,
    apply,
    wait_for,
)
from tests.node.pods import (
    ROLLOUT_SECONDS,
    container_process,
    ready_pods,
    run_standin,
    standin_runtime,
)
from tests.support import uploads
from tests.support.go_operator import without_scratch
from trussium_operator.common.api import TrussiumRuntime
from trussium_operator.common.defaulting import apply_defaults
from trussium_operator.controller.runtime.kinds import render_managed_objects

pytestmark = [pytest.mark.node, pytest.mark.usefixtures("standin")]
UPLOADS = Path(uploads.__file__).resolve()
MB = 1_000_000
MIB = 1024 * 1024
PARSE_ERROR = {"detail": "There was an error parsing the body"}
# Far longer than any wait below: a runtime that waited out its drain would fail them.
LONG_DRAIN = {"shutdownDrainTimeoutSeconds": 300}
CLIENT_TIMEOUT_SECONDS = 60


class NodeUpload:
    """tests/support/uploads.py run in the node's network namespace, held before
    its last bytes until `finish`."""

    def __init__(self, plane: ControlPlane, pod: Obj, size: int) -> None:
        url = f"http://{pod['status']['podIP']}:9000"
        argv = plane.node.enter(sys.executable, str(UPLOADS), url, str(size), "--hold")
        self.process = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        assert self.process.stdout is not None
        held = self.process.stdout.readline().strip()
        assert held == "held", self.process.communicate(timeout=CLIENT_TIMEOUT_SECONDS)

    def abandon(self) -> None:
        self.process.kill()
        self.process.communicate(timeout=CLIENT_TIMEOUT_SECONDS)

    def finish(self) -> tuple[int, Obj]:
        out, err = self.process.communicate("go\n", timeout=CLIENT_TIMEOUT_SECONDS)
        assert self.process.returncode == 0, err
        answer = json.loads(out)
        return answer["status"], answer["body"]


def upload_from_node(plane: ControlPlane, pod: Obj, size: int) -> tuple[int, Obj]:
    url = f"http://{pod['status']['podIP']}:9000"
    argv = plane.node.enter(sys.executable, str(UPLOADS), url, str(size))
    answer = subprocess.run(
        argv, capture_output=True, text=True, timeout=CLIENT_TIMEOUT_SECONDS, check=True
    )
    result = json.loads(answer.stdout)
    return result["status"], result["body"]


def refuses_connections(plane: ControlPlane, pod: Obj) -> bool:
    """Whether a new TCP connection to the pod's port is refused (its listener closed)."""
    code = (
        "import socket, sys\n"
        "try:\n"
        "    socket.create_connection((sys.argv[1], 9000), timeout=5).close()\n"
        "except ConnectionRefusedError:\n"
        "    print('refused')\n"
    )
    argv = plane.node.enter(sys.executable, "-c", code, pod["status"]["podIP"])
    answer = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=True)
    return answer.stdout.strip() == "refused"


def mounts(pid: int) -> dict[str, tuple[str, str]]:
    """The container's mounts: mount point -> (root within its filesystem, super options)."""
    table = {}
    for line in Path(f"/proc/{pid}/mountinfo").read_text().splitlines():
        fields, _, filesystem = line.partition(" - ")
        root, point = fields.split()[3:5]
        table[point] = (root, filesystem.split()[-1])
    return table


def writable_layer(plane: ControlPlane, pid: int) -> list[str]:
    """What the container's root overlay holds in its writable (upper) layer:
    one `path type size` line per entry, read in the node's mount namespace."""
    _, options = mounts(pid)["/"]
    (upper,) = [
        o.removeprefix("upperdir=") for o in options.split(",") if o.startswith("upperdir=")
    ]
    listing = subprocess.run(
        plane.node.enter("find", upper, "-mindepth", "1", "-printf", "%P %y %s\n"),
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return sorted(listing.stdout.splitlines())


def spooled(pid: int) -> list[int]:
    """The sizes of the files over 1 MiB in the container's /tmp."""
    scratch = Path(f"/proc/{pid}/root/tmp")
    return [f.stat().st_size for f in scratch.iterdir() if f.stat().st_size > MIB]


@pytest.mark.usefixtures("controller")
def test_a_2_mb_upload_is_spooled_to_the_empty_dir_and_nowhere_else(
    plane: ControlPlane, namespace: str
) -> None:
    pod = run_standin(plane, "uploads", namespace)
    pid = container_process(plane, pod)
    table = mounts(pid)
    assert table["/tmp"][0].endswith("/volumes/kubernetes.io~empty-dir/scratch"), table["/tmp"]
    layer = writable_layer(plane, pid)
    assert not [entry for entry in layer if entry.split()[1] == "f" and entry.split()[2] != "0"]

    held = NodeUpload(plane, pod, 2 * MB)
    wait_for(lambda: spooled(pid), "the upload's bytes in the emptyDir while it runs", 30)
    assert len(spooled(pid)) == 1
    assert writable_layer(plane, pid) == layer
    status, answer = held.finish()
    assert (status, answer["file"]) == (
        200,
        {"filename": "speech.wav", "bytes": 2 * MB, "spooledTo": "/tmp"},
    )
    assert list(Path(f"/proc/{pid}/root/tmp").iterdir()) == [], "removed with the request"
    assert writable_layer(plane, pid) == layer, "nothing written to the container's layer"


def bare_pod(name: str, namespace: str, template: Obj) -> Obj:
    metadata = {**template["metadata"], "name": name, "namespace": namespace}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": template["spec"]}


def pod_ready(plane: ControlPlane, name: str, namespace: str) -> Obj | None:
    answer = plane.kubectl("get", "pod", name, "-n", namespace, "-o", "json")
    pod: Obj = json.loads(answer.stdout)
    conditions = pod.get("status", {}).get("conditions") or []
    return pod if any(c["type"] == "Ready" and c["status"] == "True" for c in conditions) else None


@pytest.mark.parametrize(
    ("operator", "large"),
    [("ours", (200, "/tmp")), ("go", (400, PARSE_ERROR))],
)
def test_without_the_scratch_space_uploads_over_1_mib_fail_as_with_the_real_runtime(
    plane: ControlPlane, namespace: str, operator: str, large: tuple[int, object]
) -> None:
    """A pod of each operator's template, run bare (no controller): under the Go
    operator's, which has no writable directory, the runtime starts and passes its
    probes, small uploads work, and a 2 MB one fails with the framework's 400."""
    runtime = TrussiumRuntime.model_validate(
        apply_defaults(standin_runtime("plain", namespace)).object
    )
    objects = {obj["kind"]: obj for obj in render_managed_objects(runtime)}
    template = objects["Deployment"]["spec"]["template"]
    templates = {"ours": template, "go": without_scratch(template)}
    for kind in ("ConfigMap", "ServiceAccount"):
        del objects[kind]["metadata"]["ownerReferences"]  # no runtime object: no owner
        apply(plane, objects[kind])
    name = f"{operator}-template"
    apply(plane, bare_pod(name, namespace, templates[operator]))
    pod = wait_for(lambda: pod_ready(plane, name, namespace), f"{name} Ready", ROLLOUT_SECONDS)

    assert upload_from_node(plane, pod, 100_000)[0] == 200, "small uploads stay in memory"
    status, body = upload_from_node(plane, pod, 2 * MB)
    assert (status, body["file"]["spooledTo"] if status == 200 else body) == large
    logs = plane.kubectl("logs", "-n", namespace, name).stdout
    failing = "uploads over 1 MiB will fail: no usable temporary directory"
    assert (failing in logs) == (operator == "go"), logs


@pytest.mark.usefixtures("controller")
def test_a_deleted_pod_refuses_new_connections_finishes_its_upload_and_exits_when_idle(
    plane: ControlPlane, namespace: str
) -> None:
    pod = run_standin(plane, "shutdown", namespace, runtime=LONG_DRAIN)
    name, pid = pod["metadata"]["name"], container_process(plane, pod)
    held = NodeUpload(plane, pod, 2 * MB)
    wait_for(lambda: spooled(pid), "the upload in flight", 30)

    plane.kubectl("delete", "pod", name, "-n", namespace, "--wait=false")
    wait_for(lambda: refuses_connections(plane, pod), "the listener closed at SIGTERM", 30)
    assert Path(f"/proc/{pid}").exists(), "the runtime exited with a request in flight"
    logs = plane.kubectl("logs", "-n", namespace, name).stdout
    assert "listener closed; waiting up to 300s for 1 request(s) in flight" in logs

    def terminating_endpoint() -> Obj | None:
        """The pod's endpoint conditions in its Service's EndpointSlice, once terminating."""
        slices = plane.kubectl(
            "get", "endpointslices", "-n", namespace,
            "-l", "kubernetes.io/service-name=shutdown", "-o", "json",
        ).stdout  # fmt: skip
        for item in json.loads(slices)["items"]:
            for entry in item.get("endpoints") or []:
                conditions: Obj = entry.get("conditions") or {}
                if pod["status"]["podIP"] in entry["addresses"] and conditions.get("terminating"):
                    return conditions
        return None

    conditions = wait_for(terminating_endpoint, "the endpoint marked terminating", 30)
    assert conditions["ready"] is False, "no Service routes new connections to it"

    status, answer = held.finish()
    assert (status, answer["file"]["bytes"]) == (200, 2 * MB), "the request in flight completed"
    finished = time.monotonic()
    wait_for(lambda: not Path(f"/proc/{pid}").exists(), "the runtime to exit once idle", 60)
    print(f"exited {time.monotonic() - finished:.1f}s after its last request (drain: 300s)")


@pytest.mark.usefixtures("controller")
def test_a_scratch_space_filled_past_its_size_limit_gets_the_pod_evicted(
    plane: ControlPlane, namespace: str
) -> None:
    """The emptyDir counts in the pod's ephemeral storage: the kubelet evicts a pod
    whose scratch space holds more than its sizeLimit (it measures volumes about
    once a minute), and the Deployment replaces it."""
    pod = run_standin(plane, "evicted", namespace, scratch={"sizeLimit": "16Mi"})
    name, pid = pod["metadata"]["name"], container_process(plane, pod)
    held = NodeUpload(plane, pod, 20 * MIB)
    try:
        wait_for(lambda: spooled(pid), "the upload spooled", 30)

        def eviction() -> str | None:
            """The note of the kubelet's Evicted event for the pod."""
            answer = plane.kubectl(
                "get", "events", "-n", namespace, "-o", "json",
                f"--field-selector=involvedObject.name={name},reason=Evicted",
            )  # fmt: skip
            notes = [str(e.get("message")) for e in json.loads(answer.stdout)["items"]]
            return notes[0] if notes else None

        note = wait_for(eviction, "the kubelet to evict the pod", 240)
    finally:
        held.abandon()
    assert 'Usage of EmptyDir volume "scratch" exceeds the limit "16Mi"' in note
    wait_for(
        lambda: [
            p for p in ready_pods(plane, "evicted", namespace) if p["metadata"]["name"] != name
        ],
        "a replacement pod Ready",
        ROLLOUT_SECONDS,
    )
