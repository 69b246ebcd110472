"""The generated CRD on a real API server (no webhook): install, defaults, rejections, kubectl."""

import json
import time
from typing import Any

import pytest

from devcluster import ControlPlane
from devcluster.controller_harness import patch_status
from devcluster.hostoperator import install_crds
from tests.conftest import Kubectl
from trussium_operator.common.defaulting import apply_defaults

pytestmark = pytest.mark.api

DIGEST = "sha256:" + "c" * 64


@pytest.fixture(scope="module")
def installed(api_plane: ControlPlane) -> None:
    """Server-side apply of the committed CRD (idempotent, shared with other tests)."""
    install_crds(api_plane)


def runtime(name: str, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "image": {"repository": "ghcr.io/trussium/runtime", "tag": "1.4.2"},
        "provider": {"type": "ollama", "model": "llama3"},
    }
    body.update(spec)
    return {
        "apiVersion": "runtime.trussium.io/v1alpha1",
        "kind": "TrussiumRuntime",
        "metadata": {"name": name},
        "spec": body,
    }


def apply(kubectl: Kubectl, namespace: str, obj: dict[str, Any], check: bool = True) -> Any:
    return kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(obj), check=check)


@pytest.mark.usefixtures("installed")
@pytest.mark.parametrize(
    "spec",
    [
        {},
        {"autoscaling": {"enabled": True, "maxReplicas": 4}, "networkPolicy": {}},
        {
            "image": {"repository": "rt", "digest": DIGEST, "pullPolicy": "Always"},
            "replicas": 0,
            "service": {"type": "NodePort"},
            "networkPolicy": {"enabled": True, "ingress": [{"namespaceSelector": {}}]},
            "resources": {"requests": {"cpu": "250m", "memory": 268435456}},
            "scheduling": {"tolerations": [{"operator": "Exists"}]},
        },
        {
            "image": {"repository": "rt", "tag": "1", "digest": None, "pullPolicy": None},
            "replicas": None,
            "runtime": None,
            "podMetadata": {"labels": {"a": None, "b": "x"}},
            "resources": {"limits": {"cpu": None, "memory": 2.0}},
        },
    ],
    ids=["minimal", "nested-defaults", "full", "nulls"],
)
def test_valid_runtimes_are_stored_with_the_same_defaults_as_ours(
    kubectl: Kubectl, namespace: str, spec: dict[str, Any]
) -> None:
    obj = runtime("rt", **spec)
    apply(kubectl, namespace, obj)
    stored = json.loads(kubectl("get", "truntime", "rt", "-n", namespace, "-o", "json").stdout)
    assert stored["spec"] == apply_defaults(obj).object["spec"]
    given = spec.get("replicas")
    assert stored["spec"]["replicas"] == (1 if given is None else given)
    assert stored["spec"]["service"]["port"] == 9000


@pytest.mark.usefixtures("installed")
@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"replicas": 1001}, "spec.replicas: Invalid value: 1001"),
        ({"service": {"port": 0}}, "spec.service.port: Invalid value: 0"),
        (
            {"image": {"repository": "rt", "tag": "1", "digest": DIGEST}},
            "exactly one of tag or digest must be specified",
        ),
        (
            {"networkPolicy": {"enabled": True}},
            "at least one ingress rule is required when networkPolicy.enabled is true",
        ),
        (
            {"autoscaling": {"minReplicas": 5, "maxReplicas": 2}},
            "maxReplicas must be greater than or equal to minReplicas",
        ),
        ({"podSpec": {"containers": []}}, 'unknown field "spec.podSpec"'),
    ],
    ids=["replicas", "port", "tag-and-digest", "policy-without-ingress", "bounds", "podSpec"],
)
def test_invalid_runtimes_are_rejected_with_the_contract_messages(
    kubectl: Kubectl, namespace: str, spec: dict[str, Any], expected: str
) -> None:
    result = apply(kubectl, namespace, runtime("bad", **spec), check=False)
    assert result.returncode != 0
    assert expected in result.stderr
    listed = kubectl("get", "truntime", "-n", namespace, "-o", "name").stdout
    assert listed.strip() == ""


@pytest.mark.usefixtures("installed")
def test_kubectl_get_shows_the_printer_columns(kubectl: Kubectl, namespace: str) -> None:
    apply(kubectl, namespace, runtime("rt", replicas=2))
    status = {
        "status": {
            "readyReplicas": 1,
            "desiredReplicas": 2,
            "currentImage": "ghcr.io/trussium/runtime:1.4.2",
            "conditions": [
                {
                    "type": "Ready",
                    "status": "False",
                    "reason": "RuntimeNotReady",
                    "message": "1 of 2 replicas are ready.",
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                }
            ],
        }
    }
    patch_status(kubectl, "truntime", "rt", namespace, status["status"])
    header, row = kubectl("get", "truntime", "-n", namespace).stdout.splitlines()
    assert header.split() == [
        "NAME",
        "READY",
        "DESIRED",
        "PROVIDER",
        "MODEL",
        "VERSION",
        "TARGET",
        "STATUS",
        "REASON",
        "IMAGE",
        "AGE",
    ]
    assert row.split()[:10] == [
        "rt",
        "1",
        "2",
        "ollama",
        "llama3",
        "1.4.2",
        "2",
        "False",
        "RuntimeNotReady",
        "ghcr.io/trussium/runtime:1.4.2",
    ]
    wide = kubectl("get", "trussiumruntimes", "-n", namespace, "-o", "wide").stdout
    wide_header, wide_row = wide.splitlines()
    assert "MESSAGE" in wide_header
    assert "DESIRED IMAGE" in wide_header
    assert "1 of 2 replicas are ready." in wide_row


@pytest.mark.usefixtures("installed")
def test_an_autoscaled_digest_pinned_runtime_shows_its_replicas_and_image_from_status(
    kubectl: Kubectl, namespace: str
) -> None:
    """spec.replicas and spec.image.tag say nothing here: the autoscaler runs 5 of 8,
    and the image has a digest, not a tag. The status columns show both: Target 8 where
    Desired (spec.replicas) shows 1."""
    digest = "ghcr.io/trussium/runtime@sha256:" + "a" * 64
    body = runtime("scaled", replicas=1)
    body["spec"]["image"] = {
        "repository": "ghcr.io/trussium/runtime",
        "digest": "sha256:" + "a" * 64,
    }
    body["spec"]["autoscaling"] = {"enabled": True, "minReplicas": 2, "maxReplicas": 8}
    body["spec"]["resources"] = {"requests": {"cpu": "100m"}}
    apply(kubectl, namespace, body)
    status = {
        "status": {
            "readyReplicas": 5,
            "desiredReplicas": 8,
            "desiredImage": digest,
            "currentImage": digest,
            "conditions": [
                {
                    "type": "Ready",
                    "status": "False",
                    "reason": "RuntimeNotReady",
                    "message": "5 of 8 replicas are ready.",
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                }
            ],
        }
    }
    patch_status(kubectl, "truntime", "scaled", namespace, status["status"])
    wide = kubectl("get", "truntime", "scaled", "-n", namespace, "-o", "wide").stdout
    header, row = wide.splitlines()
    assert "5 of 8 replicas are ready." in row
    assert row.split().count(digest) == 2  # IMAGE and DESIRED IMAGE
    column = {name: row[header.index(name) :].split()[0] for name in ("DESIRED", "TARGET")}
    assert column == {"DESIRED": "1", "TARGET": "8"}
    assert row[header.index("VERSION") : header.index("TARGET")].strip() == ""  # no tag


@pytest.mark.usefixtures("installed")
def test_kubectl_explain_shows_the_field_descriptions(api_plane: ControlPlane) -> None:
    deadline = time.monotonic() + 60
    while True:  # the OpenAPI document is published shortly after the CRD is established
        result = api_plane.kubectl("explain", "trussiumruntime.spec.image", check=False)
        if result.returncode == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert result.returncode == 0, result.stderr
    text = " ".join(result.stdout.split())
    assert "Image repository, optionally with a registry host" in text
    assert "Exactly one of tag or digest" in text
    assert "pullPolicy" in text
