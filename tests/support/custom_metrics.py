"""A stand-in for a custom metrics adapter: `custom.metrics.k8s.io/v1beta2` on loopback.

It serves what kube-controller-manager's HPA controller asks an adapter such
as prometheus-adapter: the group version's discovery, and one Pods metric's
value for each Pod a label selector matches, always the same value. It is
registered with the API server as an aggregated API (an APIService backed by
an ExternalName Service naming 127.0.0.1), so the HPA controller reaches it
exactly as it would a real adapter, through the API server's aggregator.
"""

import asyncio
import base64
import json
import socket
import ssl
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aiohttp import web

from certs.authority import generate_ca, issue_serving_certificate, service_dns_names

GROUP = "custom.metrics.k8s.io"
VERSION = "v1beta2"
GROUP_VERSION = f"{GROUP}/{VERSION}"
START_TIMEOUT_SECONDS = 10.0

# The names of the Pods a label selector matches in a namespace.
PodLister = Callable[[str, str], list[str]]


def _metric_values(namespace: str, metric: str, pods: list[str], value: str) -> dict[str, Any]:
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    items = [
        {
            "describedObject": {
                "kind": "Pod",
                "namespace": namespace,
                "name": pod,
                "apiVersion": "/v1",
            },
            "metric": {"name": metric},
            "timestamp": now,
            "windowSeconds": 60,
            "value": value,
        }
        for pod in pods
    ]
    return {"kind": "MetricValueList", "apiVersion": GROUP_VERSION, "metadata": {}, "items": items}


def _application(metric: str, value: str, list_pods: PodLister) -> web.Application:
    async def discovery(_: web.Request) -> web.Response:
        resource = {
            "name": f"pods/{metric}",
            "singularName": "",
            "namespaced": True,
            "kind": "MetricValueList",
            "verbs": ["get"],
        }
        body = {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": GROUP_VERSION,
            "resources": [resource],
        }
        return web.json_response(body)

    async def pods_metric(request: web.Request) -> web.Response:
        namespace, asked = request.match_info["namespace"], request.match_info["metric"]
        if asked != metric:
            return web.json_response({"kind": "Status", "code": 404}, status=404)
        selector = request.query.get("labelSelector", "")
        pods = await asyncio.to_thread(list_pods, namespace, selector)
        return web.json_response(_metric_values(namespace, metric, pods, value))

    app = web.Application()
    app.router.add_get(f"/apis/{GROUP_VERSION}", discovery)
    app.router.add_get(
        f"/apis/{GROUP_VERSION}/namespaces/{{namespace}}/pods/*/{{metric}}", pods_metric
    )
    return app


class FakeCustomMetrics:
    """The running server: its port and the CA bundle an APIService trusts it with."""

    def __init__(self, port: int, ca_bundle: bytes) -> None:
        self.port = port
        self.ca_bundle = ca_bundle


@contextmanager
def serving_custom_metrics(
    service: str, namespace: str, metric: str, value: str, list_pods: PodLister
) -> Iterator[FakeCustomMetrics]:
    """Serve on 127.0.0.1 (an ephemeral port) with a certificate for the Service's names,
    on a thread of its own until the block ends."""
    now = datetime.now(UTC)
    ca = generate_ca("fake-custom-metrics-ca", now=now)
    serving = issue_serving_certificate(ca, service_dns_names(service, namespace), now=now)
    loop = asyncio.new_event_loop()
    started = threading.Event()
    with tempfile.TemporaryDirectory() as directory:
        cert, key = Path(directory, "tls.crt"), Path(directory, "tls.key")
        cert.write_bytes(serving.certificate_pem)
        key.write_bytes(serving.private_key_pem)
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(cert, key)
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    runner = web.AppRunner(_application(metric, value, list_pods))

    async def start() -> None:
        await runner.setup()
        await web.SockSite(runner, listener, ssl_context=context).start()
        started.set()

    def run() -> None:
        loop.run_until_complete(start())
        loop.run_forever()
        loop.run_until_complete(runner.cleanup())
        loop.close()

    thread = threading.Thread(target=run, name="fake-custom-metrics", daemon=True)
    thread.start()
    try:
        if not started.wait(START_TIMEOUT_SECONDS):
            raise RuntimeError("the fake custom metrics server did not start")
        yield FakeCustomMetrics(port, ca.certificate_pem)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(START_TIMEOUT_SECONDS)


def api_service(service: str, namespace: str, server: FakeCustomMetrics) -> list[dict[str, Any]]:
    """The ExternalName Service naming loopback and the APIService routed through it."""
    external = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": service, "namespace": namespace},
        "spec": {"type": "ExternalName", "externalName": "127.0.0.1"},
    }
    registration = {
        "apiVersion": "apiregistration.k8s.io/v1",
        "kind": "APIService",
        "metadata": {"name": f"{VERSION}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "version": VERSION,
            "service": {"name": service, "namespace": namespace, "port": server.port},
            "caBundle": base64.b64encode(server.ca_bundle).decode(),
            "groupPriorityMinimum": 100,
            "versionPriority": 100,
        },
    }
    return [external, registration]


def pods_json_names(output: str) -> list[str]:
    """The Pod names in `kubectl get pods -o json` output."""
    return [pod["metadata"]["name"] for pod in json.loads(output)["items"]]
