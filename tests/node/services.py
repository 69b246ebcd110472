"""Services on the node as a client in it sees them: their ready endpoints,
kube-proxy's rules for them, and requests sent through them from the node's
network namespace."""

import json
import subprocess
import sys
import time

from devcluster import ControlPlane
from devcluster.controller_harness import Obj, wait_for
from devcluster.polling import WaitTimeoutError

# kube-proxy programs a Service's new endpoints within about a second; generous for
# a loaded machine.
PROXY_SECONDS = 60.0
# A client in the node waits this long for an answer through a Service.
NODE_CLIENT_SECONDS = 20.0


def get_from_node(plane: ControlPlane, url: str) -> tuple[int, str]:
    """GET `url` from inside the node's network namespace (as a host-network client):
    the status, or 0 and the client's error."""
    code = (
        "import sys, urllib.request\n"
        "print(urllib.request.urlopen(sys.argv[1], timeout=float(sys.argv[2])).status)"
    )
    answer = subprocess.run(
        plane.node.enter(sys.executable, "-c", code, url, str(NODE_CLIENT_SECONDS)),
        capture_output=True,
        text=True,
        timeout=NODE_CLIENT_SECONDS + 60,
    )
    if answer.returncode != 0:
        return 0, answer.stderr.strip().splitlines()[-1] if answer.stderr.strip() else "no output"
    return int(answer.stdout), ""


def ready_endpoints(plane: ControlPlane, service: str, namespace: str) -> list[str]:
    """The ready endpoints of `service` as its EndpointSlices list them, as address:port."""
    slices = plane.kubectl(
        "get", "endpointslices", "-n", namespace,
        "-l", f"kubernetes.io/service-name={service}", "-o", "json",
    ).stdout  # fmt: skip
    return sorted(
        f"{address}:{port['port']}"
        for s in json.loads(slices)["items"]
        for port in s.get("ports") or []
        for endpoint in s.get("endpoints") or []
        if endpoint.get("conditions", {}).get("ready")
        for address in endpoint["addresses"]
    )


def proxy_rules(plane: ControlPlane, service: str, namespace: str) -> list[str]:
    """kube-proxy's iptables rules in the node for `service` (those naming it in their comment)."""
    saved = subprocess.run(
        plane.node.enter("iptables-save"), capture_output=True, text=True, timeout=60, check=True
    ).stdout
    return [line for line in saved.splitlines() if f"{namespace}/{service}" in line]


def wait_routed(plane: ControlPlane, service: Obj, replicas: int) -> list[str]:
    """Wait until the Service has `replicas` ready endpoints and kube-proxy's rules in the
    node send its ClusterIP (and NodePort, if any) to each of them; return the endpoints.

    kube-proxy programs a change some time after the EndpointSlice shows it (its
    minimum sync period, more on a loaded machine); until then the Service's rules
    reject connections ("has no endpoints") or miss an endpoint.
    """
    name, namespace = service["metadata"]["name"], service["metadata"]["namespace"]
    port = service["spec"]["ports"][0]
    entries = [f"-d {service['spec']['clusterIP']}/32"]
    if "nodePort" in port:
        entries.append(f"--dport {port['nodePort']}")
    seen: dict[str, list[str]] = {"endpoints": [], "rules": []}

    def routed() -> list[str] | None:
        seen["endpoints"] = endpoints = ready_endpoints(plane, name, namespace)
        seen["rules"] = rules = proxy_rules(plane, name, namespace)
        text = "\n".join(rules)
        done = (
            len(endpoints) == replicas
            and all(entry in text for entry in entries)
            and all(f"--to-destination {endpoint}" in text for endpoint in endpoints)
            and "has no endpoints" not in text
        )
        return endpoints if done else None

    began = time.monotonic()
    try:
        endpoints = wait_for(routed, f"kube-proxy to route {namespace}/{name}", PROXY_SECONDS)
    except WaitTimeoutError as timeout:
        rules = "\n".join(seen["rules"]) or "(none)"
        raise AssertionError(
            f"{timeout}; ready endpoints: {seen['endpoints']}; kube-proxy's rules:\n{rules}"
        ) from None
    print(f"{namespace}/{name}: routed by kube-proxy after {time.monotonic() - began:.1f}s")
    return endpoints
