"""The chart serves /metrics as the Go operator's does: both programs on 8443 over
HTTPS behind the API server's reviews, with the RBAC that needs, a metrics-viewer
ClusterRole, and a ServiceMonitor that scrapes over HTTPS with a bearer token;
plain HTTP only with metrics.secure=false. What the programs then do with a
token is proven in tests/apiserver/test_metrics_auth.py."""

import argparse
import base64
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from devcluster import ControlPlane
from tests.support.chart import (
    CHART,
    accepted,
    container,
    find,
    fullname,
    release_name,
    render,
    render_error,
)
from trussium_operator.controller.cli import parser as controller_parser
from trussium_operator.webhook.cli import build_parser as webhook_parser

pytestmark = pytest.mark.api

PROGRAMS = {"controller": controller_parser, "webhook": webhook_parser}
GO_BUNDLE = Path(__file__).resolve().parents[1] / "fixtures" / "go-operator-bundle.yaml"
CLUSTER_SCOPED = {"ClusterRole", "ClusterRoleBinding"}


def _parsed(objects: list[dict[str, Any]], name: str, program: str) -> argparse.Namespace:
    main = container(find(objects, "Deployment", f"{name}-{program}"))
    return PROGRAMS[program]().parse_args([*main["command"][1:], *main["args"]])


def _endpoint(objects: list[dict[str, Any]], name: str) -> dict[str, Any]:
    (endpoint,) = find(objects, "ServiceMonitor", name)["spec"]["endpoints"]
    return dict(endpoint)


def _metrics_ports(objects: list[dict[str, Any]], name: str) -> dict[str, Any]:
    services = {
        "controller": find(objects, "Service", f"{name}-controller-metrics"),
        "webhook": find(objects, "Service", f"{name}-webhook"),
    }
    return {
        program: next(p for p in service["spec"]["ports"] if p["name"] == "metrics")
        for program, service in services.items()
    }


def test_by_default_https_on_8443_behind_reviews(plane: ControlPlane, namespace: str) -> None:
    release = release_name()
    name = fullname(release)
    objects = render(plane, release, namespace, "--set", "metrics.serviceMonitor.enabled=true")
    accepted(plane, namespace, objects)
    for program in PROGRAMS:
        served = _parsed(objects, name, program)
        assert (served.metrics_bind_address, served.metrics_secure) == ("0.0.0.0:8443", True)
        main = container(find(objects, "Deployment", f"{name}-{program}"))
        assert {"name": "metrics", "containerPort": 8443, "protocol": "TCP"} in main["ports"]
        mounts = {m["mountPath"]: m["name"] for m in main["volumeMounts"]}
        assert (
            mounts[str(served.metrics_cert_path)]
            == {
                "controller": "metrics-certs",
                "webhook": "certs",  # the webhook's own serving certificate
            }[program]
        )
    controller = find(objects, "Deployment", f"{name}-controller")["spec"]["template"]["spec"]
    (volume,) = [v for v in controller["volumes"] if v["name"] == "metrics-certs"]
    assert volume["secret"] == {
        "secretName": f"{name}-webhook-tls",  # written by the controller after it starts
        "defaultMode": 0o440,
        "optional": True,
        "items": [{"key": "tls.crt", "path": "tls.crt"}, {"key": "tls.key", "path": "tls.key"}],
    }
    assert served.health_bind_address == "0.0.0.0:8081", "the webhook's probes stay apart"
    for port in _metrics_ports(objects, name).values():
        assert (port["port"], port["targetPort"]) == (8443, "metrics")

    endpoint = _endpoint(objects, name)
    assert endpoint["scheme"] == "https"
    assert endpoint["bearerTokenFile"] == "/var/run/secrets/kubernetes.io/serviceaccount/token"
    assert endpoint["tlsConfig"] == {
        "ca": {"secret": {"name": f"{name}-webhook-tls", "key": "ca.crt"}},
        "serverName": f"{name}-webhook.{namespace}.svc",
    }

    reader = find(objects, "ClusterRole", f"{name}-metrics-viewer")
    assert reader["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    reviews = find(objects, "ClusterRole", f"{name}-access-reviews")["rules"]
    assert {(r["apiGroups"][0], r["resources"][0], *r["verbs"]) for r in reviews} == {
        ("authentication.k8s.io", "tokenreviews", "create"),
        ("authorization.k8s.io", "subjectaccessreviews", "create"),
    }
    subjects = find(objects, "ClusterRoleBinding", f"{name}-access-reviews")["subjects"]
    assert {s["name"] for s in subjects} == {f"{name}-controller", f"{name}-webhook"}
    webhook_pod = find(objects, "Deployment", f"{name}-webhook")["spec"]["template"]["spec"]
    assert webhook_pod["automountServiceAccountToken"] is True, "the reviews need its token"


def test_plain_http_only_when_asked_for(plane: ControlPlane, namespace: str) -> None:
    release = release_name()
    name = fullname(release)
    objects = render(
        plane,
        release,
        namespace,
        "--set",
        "metrics.secure=false",
        "--set",
        "metrics.serviceMonitor.enabled=true",
    )
    for program in PROGRAMS:
        assert _parsed(objects, name, program).metrics_secure is False
    endpoint = _endpoint(objects, name)
    assert endpoint["scheme"] == "http"
    assert not {"tlsConfig", "bearerTokenFile", "authorization"} & endpoint.keys()
    assert not [o for o in objects if o["metadata"]["name"] == f"{name}-access-reviews"]
    webhook_pod = find(objects, "Deployment", f"{name}-webhook")["spec"]["template"]["spec"]
    assert webhook_pod["automountServiceAccountToken"] is True, "Secret references' reviews"
    unreviewed = render(
        plane,
        release,
        namespace,
        "--set",
        "metrics.secure=false",
        "--set",
        "webhook.authorizeSecretReferences=false",
    )
    webhook_pod = find(unreviewed, "Deployment", f"{name}-webhook")["spec"]["template"]["spec"]
    assert webhook_pod["automountServiceAccountToken"] is False, "it calls no API then"


def test_a_certificate_secret_a_ca_and_token_secret_and_reader_subjects(
    plane: ControlPlane, namespace: str
) -> None:
    release = release_name()
    name = fullname(release)
    tls = {"ca": {"secret": {"name": "metrics-tls", "key": "ca.crt"}}, "serverName": "metrics"}
    authorization = {"credentials": {"name": "scraper-token", "key": "token"}}
    objects = render(
        plane,
        release,
        namespace,
        "--set",
        "metrics.certificateSecret=metrics-tls",
        "--set",
        "metrics.port=9090",
        "--set",
        "metrics.serviceMonitor.enabled=true",
        "--set-json",
        f"metrics.serviceMonitor.tlsConfig={json.dumps(tls)}",
        "--set-json",
        f"metrics.serviceMonitor.authorization={json.dumps(authorization)}",
        "--set-json",
        'metrics.readerSubjects=[{"kind":"ServiceAccount","name":"prometheus",'
        '"namespace":"monitoring"},{"kind":"Group","name":"sre"}]',
    )
    accepted(plane, namespace, objects)
    for program in PROGRAMS:
        served = _parsed(objects, name, program)
        assert served.metrics_bind_address == "0.0.0.0:9090"
        pod = find(objects, "Deployment", f"{name}-{program}")["spec"]["template"]["spec"]
        (volume,) = [v for v in pod["volumes"] if v["name"] == "metrics-certs"]
        assert volume["secret"]["secretName"] == "metrics-tls"
        (mount,) = [m for m in container({"spec": {"template": {"spec": pod}}})["volumeMounts"]
                    if m["name"] == "metrics-certs"]  # fmt: skip
        assert str(served.metrics_cert_path) == mount["mountPath"]
    assert {p["port"] for p in _metrics_ports(objects, name).values()} == {9090}
    endpoint = _endpoint(objects, name)
    assert (endpoint["tlsConfig"], endpoint["authorization"]) == (tls, authorization)
    assert "bearerTokenFile" not in endpoint
    binding = find(objects, "ClusterRoleBinding", f"{name}-metrics-viewer")
    assert binding["roleRef"]["name"] == f"{name}-metrics-viewer"
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "prometheus", "namespace": "monitoring"},
        {"kind": "Group", "name": "sre", "apiGroup": "rbac.authorization.k8s.io"},
    ]


def test_the_service_monitor_verifies_against_the_webhooks_ca_in_every_mode(
    plane: ControlPlane, namespace: str
) -> None:
    release = release_name()
    name = fullname(release)
    server_name = f"{name}-webhook.{namespace}.svc"
    monitor = ("--set", "metrics.serviceMonitor.enabled=true")
    objects = render(plane, release, namespace, *monitor, "--set", "certificates.mode=certManager")
    assert _endpoint(objects, name)["tlsConfig"] == {
        "ca": {"secret": {"name": f"{name}-webhook-tls", "key": "ca.crt"}},
        "serverName": server_name,
    }
    ca = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
    provided = (
        "--set", "certificates.mode=provided",
        "--set", "certificates.provided.existingSecret=own-tls",
        "--set", f"certificates.provided.caBundle={base64.b64encode(ca.encode()).decode()}",
    )  # fmt: skip
    objects = render(plane, release, namespace, *monitor, *provided)
    accepted(plane, namespace, objects)
    assert _endpoint(objects, name)["tlsConfig"] == {
        "ca": {"configMap": {"name": f"{name}-metrics-ca", "key": "ca.crt"}},
        "serverName": server_name,
    }
    assert find(objects, "ConfigMap", f"{name}-metrics-ca")["data"] == {"ca.crt": ca}
    controller = find(objects, "Deployment", f"{name}-controller")["spec"]["template"]["spec"]
    (volume,) = [v for v in controller["volumes"] if v["name"] == "metrics-certs"]
    assert volume["secret"]["secretName"] == "own-tls"

    skipped = ("--set", "metrics.serviceMonitor.insecureSkipVerify=true")
    objects = render(plane, release, namespace, *monitor, *provided, *skipped)
    assert _endpoint(objects, name)["tlsConfig"] == {"insecureSkipVerify": True}
    assert not [o for o in objects if o["kind"] == "ConfigMap" and "metrics-ca" in str(o)]


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (["metrics.certificateSecret=metrics-tls"], "metrics.certificateSecret: set metrics."),
        (["metrics.serviceMonitor.namespace=monitoring"], "cannot read the webhook's CA"),
    ],
)
def test_a_service_monitor_that_cannot_verify_is_refused(
    plane: ControlPlane, namespace: str, values: list[str], message: str
) -> None:
    args = ["--set", "metrics.serviceMonitor.enabled=true"]
    for value in values:
        args += ["--set", value]
    assert message in render_error(plane, *args, namespace=namespace)
    opted_out = [*args, "--set", "metrics.serviceMonitor.insecureSkipVerify=true"]
    objects = render(plane, "t", namespace, *opted_out)
    assert _endpoint(objects, fullname("t"))["tlsConfig"] == {"insecureSkipVerify": True}


@pytest.mark.parametrize("port", ["8081", "9443"])
def test_a_metrics_port_taken_by_another_is_refused(
    plane: ControlPlane, namespace: str, port: str
) -> None:
    result = plane.helm(
        "template", "t", str(CHART), "--namespace", namespace, "--set", f"metrics.port={port}",
        check=False,
    )  # fmt: skip
    assert result.returncode != 0
    assert f"metrics.port {port} is taken by another port of the Pod" in result.stderr


def test_no_cluster_wide_name_is_one_the_go_operator_already_uses(
    plane: ControlPlane, namespace: str
) -> None:
    """Both run side by side while migrating, and Helm refuses to install over an
    object it does not own: with the documented release name, the Go operator's
    kustomize install already has trussium-operator-metrics-reader."""
    go = {
        (o["kind"], o["metadata"]["name"])
        for o in yaml.safe_load(GO_BUNDLE.read_text())["items"]
        if o["kind"] in CLUSTER_SCOPED
    }
    assert ("ClusterRole", "trussium-operator-metrics-reader") in go
    ours = {
        (o["kind"], o["metadata"]["name"])
        for o in render(
            plane,
            "trussium-operator",
            namespace,
            "--set-json",
            'metrics.readerSubjects=[{"kind":"Group","name":"sre"}]',
        )
        if o["kind"] in CLUSTER_SCOPED
    }
    assert ("ClusterRole", "trussium-operator-metrics-viewer") in ours
    assert ours & go == set()
