"""A Ready runtime serves (ADR 0036). On a real node, every example runtime,
applied as written, answers chat requests through its Service, from a
provider stub (`trussium-standin provider`) that stands in for Ollama and
OpenAI; and a provider outage makes a runtime unready only when its readiness
is gated on the provider (spec.readiness.dependencyChecks).

The tests share one namespace, one controller, one provider stub and the
runtimes, applied together: pods are slow to start on a shared node. Requests
come from the node's network namespace, which the production example's
NetworkPolicy would refuse where policies are enforced; the node profile's
network plugin does not enforce them.
"""

import hashlib
import json
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
import yaml

from devcluster import ControlPlane
from devcluster.controller_harness import (
    Obj,
    apply,
    condition,
    must_get,
    running_controller,
    scoped,
    wait_for,
)
from tests.node.pods import image, pods, ready_pods, wait_ready
from tests.node.runtime_image import STANDIN_TAG
from tests.node.services import NODE_CLIENT_SECONDS, proxy_rules, ready_endpoints, wait_routed
from tests.support import chat
from trussium_operator.common import constants as c

pytestmark = [pytest.mark.node, pytest.mark.usefixtures("standin")]
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
CHAT = Path(chat.__file__).resolve()
# The example runtimes (the invalid one is refused by admission, by design).
RUNTIME_EXAMPLES = (
    "runtime.yaml",
    "runtime-autoscaling.yaml",
    "runtime-production.yaml",
    "runtime-observed.yaml",
)
# The provider stub: its Deployment and Service, on Ollama's port, with the examples' models.
PROVIDER = "provider"
PROVIDER_PORT = 11434
PROVIDER_MODELS = "llama3.2,qwen2.5,mistral,gpt-4o-mini"
# runtime.yaml's runtime, and one like it whose readiness is gated on the provider.
ASSISTANT = "assistant"
CHECKED = "checked"
# Its result cache, shorter than the runtime's default (10 s) to keep the test short.
CACHE_SECONDS = 2
# The kubelet's readiness probe of every runtime pod (docs/contract.md).
PROBE_PERIOD, PROBE_TIMEOUT, PROBE_FAILURES = c.READINESS_PROBE_TIMING
# The longest a checked runtime's pods stay ready once the provider is gone: the last
# good result is reused for CACHE_SECONDS; after that every probe fails (its check
# ends within the dependency timeout, under the probe's), and the kubelet marks the
# pod unready at the PROBE_FAILURES-th failed probe, PROBE_PERIOD apart, the first of
# them up to a period after the cache ran out.
UNREADY_WITHIN = CACHE_SECONDS + PROBE_PERIOD * (PROBE_FAILURES + 1) + PROBE_TIMEOUT
# From an unready pod to the runtime's Ready=False: the Deployment controller counts
# it, the operator's watch sees the Deployment and writes the status (a loaded machine).
STATUS_SECONDS = 30.0
POLL_SECONDS = 1.0


@dataclass
class Site:
    """The shared namespace and what was applied in it."""

    namespace: str
    runtimes: dict[str, Obj]  # by name, as applied; the examples and CHECKED

    @property
    def examples(self) -> dict[str, Obj]:
        return {name: r for name, r in self.runtimes.items() if name != CHECKED}


def provider_stub(namespace: str) -> list[Obj]:
    """The stub's Deployment and Service: the stand-in image in its `provider` mode."""
    labels = {"app.kubernetes.io/name": PROVIDER}
    container = {
        "name": PROVIDER,
        "image": image(STANDIN_TAG),
        "args": ["provider", f"--listen=0.0.0.0:{PROVIDER_PORT}", f"--models={PROVIDER_MODELS}"],
        "ports": [{"name": "http", "containerPort": PROVIDER_PORT}],
        "readinessProbe": {"httpGet": {"path": "/stub/live", "port": "http"}, "periodSeconds": 1},
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        },
    }
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": PROVIDER, "namespace": namespace},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "automountServiceAccountToken": False,
                    "terminationGracePeriodSeconds": 1,
                    "containers": [container],
                },
            },
        },
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": PROVIDER, "namespace": namespace},
        "spec": {
            "selector": labels,
            "ports": [{"name": "http", "port": PROVIDER_PORT, "targetPort": "http"}],
        },
    }
    return [deployment, service]


def pointed_at(base_url: str, provider: str) -> str:
    """The example's baseURL with its host the stub's Service (by ClusterIP: the node
    has no cluster DNS), path as written. Plain http: no certificate authority the
    runtime trusts could vouch for the stub."""
    parts = urlsplit(base_url)
    return urlunsplit(("http", provider, parts.path, parts.query, parts.fragment))


def example(file: str, namespace: str, provider: str) -> Obj:
    runtime: Obj = yaml.safe_load((EXAMPLES / file).read_text())
    runtime["metadata"]["namespace"] = namespace
    spec = runtime["spec"]
    if "digest" in spec["image"]:  # the stand-in cannot have the example's digest
        del spec["image"]["digest"]
        spec["image"]["tag"] = STANDIN_TAG
    spec["provider"]["baseURL"] = pointed_at(spec["provider"]["baseURL"], provider)
    return runtime


def checked(namespace: str, provider: str) -> Obj:
    runtime = example("runtime.yaml", namespace, provider)
    runtime["metadata"]["name"] = CHECKED
    runtime["spec"]["readiness"] = {
        "dependencyChecks": True,
        "dependencyCacheSeconds": CACHE_SECONDS,
    }
    return runtime


@pytest.fixture(scope="module")
def site(
    node_plane: ControlPlane, standin: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Site]:
    plane = node_plane
    namespace = f"serving-{secrets.token_hex(3)}"
    plane.create_namespace(namespace)
    log = tmp_path_factory.mktemp("serving") / "controller.log"
    try:
        with running_controller(plane, log, *scoped(namespace)):
            stub = {"apiVersion": "v1", "kind": "List", "items": provider_stub(namespace)}
            plane.kubectl("apply", "-f", "-", input=json.dumps(stub))
            address = must_get(plane, "service", PROVIDER, namespace)["spec"]["clusterIP"]
            provider = f"{address}:{PROVIDER_PORT}"
            plane.kubectl("apply", "-n", namespace, "-f", str(EXAMPLES / "secrets.yaml"))
            runtimes = [example(f, namespace, provider) for f in RUNTIME_EXAMPLES]
            runtimes.append(checked(namespace, provider))
            for runtime in runtimes:
                apply(plane, runtime)
            for runtime in runtimes:
                wait_ready(plane, runtime["metadata"]["name"], namespace, image(STANDIN_TAG))
            yield Site(namespace, {r["metadata"]["name"]: r for r in runtimes})
    finally:
        plane.delete_namespace(namespace)


def chat_from_node(
    plane: ControlPlane, url: str, model: str, text: str, stream: bool = False
) -> dict[str, Any]:
    """tests/support/chat.py run in the node's network namespace, as a client there."""
    argv = [sys.executable, str(CHAT), url, model, text, *(["--stream"] if stream else [])]
    answer = subprocess.run(
        plane.node.enter(*argv), capture_output=True, text=True, timeout=NODE_CLIENT_SECONDS + 60
    )
    assert answer.returncode == 0, answer.stderr
    result: dict[str, Any] = json.loads(answer.stdout)
    return result


def service_url(plane: ControlPlane, name: str, namespace: str) -> str:
    """The runtime's Service, once kube-proxy routes it to every ready pod."""
    service = must_get(plane, "service", name, namespace)
    wait_routed(plane, service, replicas=len(ready_pods(plane, name, namespace)))
    return f"http://{service['spec']['clusterIP']}:{service['spec']['ports'][0]['port']}"


def completed_chats(plane: ControlPlane, name: str, namespace: str) -> float:
    """The runtime's own count of chats answered 200, summed over its pods' /metrics."""
    sample = 'trussium_http_requests_total{method="POST",outcome="completed",status_code="200"} '
    total = 0.0
    for pod in pods(plane, name, namespace):
        path = f"/api/v1/namespaces/{namespace}/pods/{pod['metadata']['name']}:9000/proxy/metrics"
        for line in plane.kubectl("get", "--raw", path).stdout.splitlines():
            if line.startswith(sample):
                total += float(line.removeprefix(sample))
    return total


def provider_requests(plane: ControlPlane, namespace: str) -> list[Obj]:
    path = f"/api/v1/namespaces/{namespace}/services/{PROVIDER}:http/proxy/stub/requests"
    seen: list[Obj] = json.loads(plane.kubectl("get", "--raw", path).stdout)["requests"]
    return seen


def key_digest(runtime: Obj) -> str:
    """The bearer the runtime should send: its Secret's key (examples/secrets.yaml),
    or, for Ollama without one, the runtime's placeholder key."""
    ref = runtime["spec"]["provider"].get("credentialsSecretRef")
    key = "ollama"
    if ref is not None:
        for document in yaml.safe_load_all((EXAMPLES / "secrets.yaml").read_text()):
            if document["metadata"]["name"] == ref["name"]:
                key = document["stringData"][ref["key"]]
    return "sha256:" + hashlib.sha256(key.encode()).hexdigest()


def test_every_example_answers_chat_requests_through_its_service(
    plane: ControlPlane, site: Site
) -> None:
    for name, runtime in site.examples.items():
        url = service_url(plane, name, site.namespace)
        provider, model = runtime["spec"]["provider"]["type"], runtime["spec"]["provider"]["model"]
        text = f"hello {name}"

        plain = chat_from_node(plane, url, model, text)
        assert plain["status"] == 200, (name, plain)
        assert (plain["body"]["provider"], plain["body"]["model"]) == (provider, model)
        assert plain["body"]["choices"][0]["message"] == {
            "role": "assistant",
            "content": f"You said: {text}",
        }

        streamed = chat_from_node(plane, url, model, text, stream=True)
        assert streamed["status"] == 200, (name, streamed)
        kinds = [event["event"] for event in streamed["events"]]
        assert (kinds[0], set(kinds[1:-1]), kinds[-1]) == ("start", {"delta"}, "end"), kinds
        deltas = [event["data"]["content"] for event in streamed["events"][1:-1]]
        assert "".join(deltas) == f"You said: {text}"

        assert completed_chats(plane, name, site.namespace) == 2

    seen = provider_requests(plane, site.namespace)
    for name, runtime in site.examples.items():
        model = runtime["spec"]["provider"]["model"]
        chats = [r for r in seen if r["path"] == "/v1/responses" and r.get("model") == model]
        assert [(r.get("stream", False), r["keySHA256"]) for r in chats] == [
            (False, key_digest(runtime)),
            (True, key_digest(runtime)),
        ], name


def scale_provider(plane: ControlPlane, namespace: str, replicas: int) -> None:
    plane.kubectl("scale", f"deployment/{PROVIDER}", f"--replicas={replicas}", "-n", namespace)


def readiness(plane: ControlPlane, namespace: str) -> tuple[dict[str, str], dict[str, int]]:
    """Every runtime's Ready condition status, and its count of ready pods."""
    listed = plane.kubectl("get", "trussiumruntimes", "-n", namespace, "-o", "json").stdout
    conditions = {
        r["metadata"]["name"]: condition(r, "Ready")[0] for r in json.loads(listed)["items"]
    }
    listed = plane.kubectl("get", "pods", "-n", namespace, "-o", "json").stdout
    counts: dict[str, int] = {}
    for pod in json.loads(listed)["items"]:
        owner = pod["metadata"].get("labels", {}).get("app.kubernetes.io/instance")
        states = pod.get("status", {}).get("conditions") or []
        if owner and any(s["type"] == "Ready" and s["status"] == "True" for s in states):
            counts[owner] = counts.get(owner, 0) + 1
    return conditions, counts


def readiness_probe_failures(plane: ControlPlane, namespace: str) -> list[str]:
    """The kubelet's messages for failed readiness probes of CHECKED's pods."""
    listed = plane.kubectl("get", "events", "-n", namespace, "-o", "json").stdout
    return [
        event["message"]
        for event in json.loads(listed)["items"]
        if event["reason"] == "Unhealthy"
        and event["involvedObject"]["name"].startswith(f"{CHECKED}-")
        and event["message"].startswith("Readiness probe failed")
    ]


def test_a_provider_outage_makes_only_the_runtime_gated_on_it_unready(
    plane: ControlPlane, site: Site
) -> None:
    namespace, unchecked = site.namespace, site.examples
    replicas = {name: len(ready_pods(plane, name, namespace)) for name in site.runtimes}
    assert readiness(plane, namespace) == ({name: "True" for name in site.runtimes}, replicas)

    scale_provider(plane, namespace, 0)
    began = time.monotonic()
    try:
        wait_for(
            lambda: (
                not ready_endpoints(plane, PROVIDER, namespace)
                and any(
                    "has no endpoints" in rule for rule in proxy_rules(plane, PROVIDER, namespace)
                )
            ),
            "the provider to be gone",
        )
        model = site.runtimes[ASSISTANT]["spec"]["provider"]["model"]
        during = chat_from_node(plane, service_url(plane, ASSISTANT, namespace), model, "hi")
        assert (during["status"], during["body"]["detail"]["code"]) == (
            502,
            "ollama_connection_failed",
        )

        # A negative wait, bounded by what the contract derives: the runtimes that do not
        # check their provider must stay Ready for at least as long as one that does may
        # take to turn unready (UNREADY_WITHIN). The loop ends once both hold: that much
        # time has passed, and CHECKED has turned Ready=False.
        unready_after = None
        while True:
            elapsed = time.monotonic() - began
            conditions, counts = readiness(plane, namespace)
            for name in unchecked:
                assert (conditions[name], counts.get(name, 0)) == ("True", replicas[name]), (
                    f"{name} turned unready {elapsed:.0f}s into the outage"
                )
            if unready_after is None and conditions[CHECKED] == "False":
                unready_after = elapsed
            if unready_after is not None and elapsed >= UNREADY_WITHIN:
                break
            assert elapsed <= UNREADY_WITHIN + STATUS_SECONDS, f"{CHECKED} still Ready"
            time.sleep(POLL_SECONDS)
        print(f"{CHECKED}: Ready=False {unready_after:.0f}s into the outage")
        assert any("503" in message for message in readiness_probe_failures(plane, namespace))
    finally:
        scale_provider(plane, namespace, 1)

    wait_ready(plane, CHECKED, namespace, image(STANDIN_TAG))
    print(f"{CHECKED}: Ready again {time.monotonic() - began:.0f}s after the outage began")
    assert readiness(plane, namespace)[0] == {name: "True" for name in site.runtimes}
    model = site.runtimes[CHECKED]["spec"]["provider"]["model"]
    after = chat_from_node(plane, service_url(plane, CHECKED, namespace), model, "back")
    assert after["status"] == 200, after
