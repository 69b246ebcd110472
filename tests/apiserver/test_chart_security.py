"""The chart's security options, rendered and given to the API server (ADR 0028):
the operator's own NetworkPolicies select its Pods and name ports they have, and
the install without Secret rights grants no account anything on Secrets.

Whether a NetworkPolicy is enforced is the CNI's business: the local control
plane has none that enforces it, so these tests prove what the API server
accepts and what the policies select, never that traffic is dropped."""

import json
from typing import Any

import pytest

from devcluster import ControlPlane
from tests.support.chart import (
    CHART,
    accepted,
    container,
    find,
    fullname,
    release_name,
    render,
)

pytestmark = pytest.mark.api

MONITORING = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
CONTROL_PLANE = {"ipBlock": {"cidr": "172.16.0.0/28"}}
API_SERVER = {"ipBlock": {"cidr": "10.0.0.10/32"}}
COMPONENTS = ("controller", "webhook")


def _policies(plane: ControlPlane, release: str, namespace: str, *values: str) -> list[Any]:
    return render(plane, release, namespace, "--set", "networkPolicy.enabled=true", *values)


def _port_names(deployment: dict[str, Any]) -> set[str]:
    return {p["name"] for p in container(deployment)["ports"]}


def _selects(policy: dict[str, Any], deployment: dict[str, Any]) -> bool:
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    wanted = policy["spec"]["podSelector"]["matchLabels"]
    return all(labels.get(key) == value for key, value in wanted.items())


def test_each_policy_selects_its_own_pods_and_opens_named_ports_to_the_chosen_peers(
    plane: ControlPlane, namespace: str
) -> None:
    release = release_name()
    name = fullname(release)
    objects = _policies(
        plane, release, namespace,
        "--set-json", f"networkPolicy.metricsFrom=[{json.dumps(MONITORING)}]",
        "--set-json", f"networkPolicy.webhookFrom=[{json.dumps(CONTROL_PLANE)}]",
        "--set", "networkPolicy.egress.enabled=true",
        "--set-json", f"networkPolicy.egress.apiServer=[{json.dumps(API_SERVER)}]",
        "--set", "networkPolicy.egress.dns=true",
    )  # fmt: skip
    accepted(plane, namespace, objects)
    deployments = {c: find(objects, "Deployment", f"{name}-{c}") for c in COMPONENTS}
    for component in COMPONENTS:
        policy = find(objects, "NetworkPolicy", f"{name}-{component}")
        assert {c for c in COMPONENTS if _selects(policy, deployments[c])} == {component}
        spec = policy["spec"]
        opened = {p["port"] for rule in spec["ingress"] for p in rule["ports"]}
        assert opened <= _port_names(deployments[component]), "a port the Pod does not have"
        assert spec["policyTypes"] == ["Ingress", "Egress"]
        assert spec["egress"] == [
            {"to": [API_SERVER], "ports": [{"protocol": "TCP", "port": p} for p in (443, 6443)]},
            {"ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]},
        ]
    controller = find(objects, "NetworkPolicy", f"{name}-controller")["spec"]["ingress"]
    assert controller == [{"from": [MONITORING], "ports": [{"protocol": "TCP", "port": "metrics"}]}]
    webhook = find(objects, "NetworkPolicy", f"{name}-webhook")["spec"]["ingress"]
    assert webhook == [
        {"from": [CONTROL_PLANE], "ports": [{"protocol": "TCP", "port": "https"}]},
        {"from": [MONITORING], "ports": [{"protocol": "TCP", "port": "metrics"}]},
    ]


def test_by_default_only_the_webhook_port_is_open_and_egress_is_not_restricted(
    plane: ControlPlane, namespace: str
) -> None:
    release = release_name()
    name = fullname(release)
    objects = _policies(plane, release, namespace)
    accepted(plane, namespace, objects)
    controller = find(objects, "NetworkPolicy", f"{name}-controller")["spec"]
    webhook = find(objects, "NetworkPolicy", f"{name}-webhook")["spec"]
    assert (controller["policyTypes"], controller["ingress"]) == (["Ingress"], [])
    assert (webhook["policyTypes"], webhook["ingress"]) == (
        ["Ingress"],
        [{"ports": [{"protocol": "TCP", "port": "https"}]}],
    )


def test_egress_without_the_api_servers_address_is_refused_with_the_command_that_finds_it(
    plane: ControlPlane,
) -> None:
    answer = plane.helm(
        "template", release_name(), str(CHART),
        "--set", "networkPolicy.enabled=true", "--set", "networkPolicy.egress.enabled=true",
        check=False,
    )  # fmt: skip
    assert answer.returncode != 0
    assert "networkPolicy.egress.apiServer is required" in answer.stderr
    assert "kubectl get endpointslices" in answer.stderr


def _secret_rules(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        rule
        for o in objects
        if o["kind"] in ("Role", "ClusterRole")
        for rule in o.get("rules") or ()
        if {"secrets", "*"} & set(rule.get("resources", ()))
        and {"", "*"} & set(rule.get("apiGroups", ()))
    ]


@pytest.mark.parametrize("mode", ["certManager", "provided"])
def test_the_install_without_secret_rights_grants_nothing_on_secrets(
    plane: ControlPlane, namespace: str, mode: str
) -> None:
    release = release_name()
    values = ["--set", f"certificates.mode={mode}"]
    if mode == "provided":
        values += [
            "--set", "certificates.provided.existingSecret=tls",
            "--set", "certificates.provided.caBundle=Q0EgYnVuZGxl",
        ]  # fmt: skip
    checked = render(plane, release, namespace, *values)
    assert _secret_rules(checked), "the default controller lists and watches Secrets"
    objects = render(
        plane, release, namespace, *values, "--set", "controller.checkSecretReferences=false"
    )
    accepted(plane, namespace, objects)
    assert _secret_rules(objects) == []
    args = container(find(objects, "Deployment", f"{fullname(release)}-controller"))["args"]
    assert "--no-check-secret-references" in args
