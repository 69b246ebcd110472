"""The Service's annotations and load balancer settings, and the roll on a credentials
Secret update (rollOnSecretChange), as the API server stores them under the controller.

The api profile has no Deployment controller: a roll shows as the Deployment's Pod
template changing, its generation moving by one, under the rolling update that keeps
every Pod until its replacement is available (maxUnavailable 0)."""

import json
from pathlib import Path
from typing import Any

import pytest

from devcluster import ControlPlane
from devcluster.controller_harness import (
    apply,
    audit_entries,
    get,
    must_get,
    now,
    running_controller,
    runtime_manifest,
    scoped,
    wait_condition,
    wait_for,
)
from devcluster.hostoperator import install_crds

pytestmark = pytest.mark.api
INTERNAL = "service.beta.kubernetes.io/aws-load-balancer-internal"
IDLE_TIMEOUT = "service.beta.kubernetes.io/aws-load-balancer-connection-idle-timeout"
VERSIONS = "runtime.trussium.io/secret-versions"


@pytest.fixture(autouse=True)
def crd(plane: ControlPlane) -> None:
    install_crds(plane)


def _service_annotations(plane: ControlPlane, namespace: str) -> dict[str, str] | None:
    """The Service's annotations; None while it does not exist yet."""
    service = get(plane, "service", "rt", namespace)
    if service is None:
        return None
    annotations: dict[str, str] = service["metadata"].get("annotations", {})
    return annotations


def test_service_settings_are_stored_and_a_removed_annotation_is_removed(
    plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    balancer: dict[str, Any] = {
        "type": "LoadBalancer",
        "annotations": {INTERNAL: "true", IDLE_TIMEOUT: "300"},
        "loadBalancerSourceRanges": ["10.0.0.0/8", "2001:db8::/32"],
        "externalTrafficPolicy": "Local",
    }
    with running_controller(plane, tmp_path / "controller.log", *scoped(namespace)):
        apply(plane, runtime_manifest("rt", namespace, service=balancer))
        wait_for(
            lambda: IDLE_TIMEOUT in (_service_annotations(plane, namespace) or {}),
            "the Service's annotations",
        )
        stored = must_get(plane, "service", "rt", namespace)
        assert stored["metadata"]["annotations"] == balancer["annotations"]
        assert stored["spec"]["loadBalancerSourceRanges"] == ["10.0.0.0/8", "2001:db8::/32"]
        assert stored["spec"]["externalTrafficPolicy"] == "Local"
        # Another manager's annotation is its own: server-side apply removes only ours.
        plane.kubectl("annotate", "service", "rt", "-n", namespace, "example.com/theirs=kept")

        balancer["annotations"] = {INTERNAL: "true"}
        apply(plane, runtime_manifest("rt", namespace, service=balancer))
        wait_for(
            lambda: IDLE_TIMEOUT not in (_service_annotations(plane, namespace) or {}),
            "the removed annotation to leave the Service",
        )
        assert _service_annotations(plane, namespace) == {
            INTERNAL: "true",
            "example.com/theirs": "kept",
        }

        # Back to ClusterIP, without annotations: the load balancer's settings go with
        # the type, and the other manager's annotation still stays.
        apply(plane, runtime_manifest("rt", namespace, service={"type": "ClusterIP"}))
        wait_for(
            lambda: must_get(plane, "service", "rt", namespace)["spec"]["type"] == "ClusterIP",
            "the Service to become ClusterIP",
        )
        stored = must_get(plane, "service", "rt", namespace)
        assert stored["metadata"]["annotations"] == {"example.com/theirs": "kept"}
        assert "loadBalancerSourceRanges" not in stored["spec"]
        assert "externalTrafficPolicy" not in stored["spec"]


def test_the_crd_refuses_load_balancer_settings_on_another_type(
    plane: ControlPlane, namespace: str
) -> None:
    """Without the webhook too: the rule is the CRD's."""
    for field in ({"externalTrafficPolicy": "Local"}, {"loadBalancerSourceRanges": ["10.0.0.0/8"]}):
        manifest = runtime_manifest("rt", namespace, service={"type": "NodePort", **field})
        refused = plane.kubectl(
            "apply", "--server-side", "-f", "-", input=json.dumps(manifest), check=False
        )
        assert refused.returncode != 0
        assert "spec.service" in refused.stderr
        assert "apply only to type LoadBalancer" in refused.stderr


def _secret(name: str, namespace: str, value: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace},
        "stringData": {"token": value},
    }


def _template_versions(plane: ControlPlane, namespace: str) -> tuple[int, str | None]:
    deployment = must_get(plane, "deployment", "rt", namespace)
    annotations = deployment["spec"]["template"]["metadata"]["annotations"]
    return deployment["metadata"]["generation"], annotations.get(VERSIONS)


def _secret_uid_and_version(plane: ControlPlane, namespace: str, name: str) -> str:
    meta = must_get(plane, "secret", name, namespace)["metadata"]
    return f"{meta['uid']}/{meta['resourceVersion']}"


def test_a_credentials_secret_update_rolls_the_pods_once_and_an_unrelated_one_never(
    plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    provider = {
        "type": "openai",
        "model": "m",
        "credentialsSecretRef": {"name": "api-key", "key": "token"},
    }
    apply(plane, _secret("api-key", namespace, "s3cr3t-one"))
    apply(plane, _secret("unrelated", namespace, "other-one"))
    with running_controller(plane, tmp_path / "controller.log", *scoped(namespace)) as controller:
        since = now()
        apply(plane, runtime_manifest("rt", namespace, provider=provider, rollOnSecretChange=True))
        wait_condition(plane, "rt", namespace, "ConfigurationValid", "True", "ReferencesResolved")
        controller.wait_quiescent()
        generation, versions = _template_versions(plane, namespace)
        assert versions == f"api-key={_secret_uid_and_version(plane, namespace, 'api-key')}"
        strategy = must_get(plane, "deployment", "rt", namespace)["spec"]["strategy"]
        assert strategy["rollingUpdate"]["maxUnavailable"] == 0

        apply(plane, _secret("unrelated", namespace, "other-two"))
        controller.wait_quiescent()
        assert _template_versions(plane, namespace) == (generation, versions)

        apply(plane, _secret("api-key", namespace, "s3cr3t-two"))
        rotated = f"api-key={_secret_uid_and_version(plane, namespace, 'api-key')}"
        assert rotated != versions
        wait_for(
            lambda: _template_versions(plane, namespace) == (generation + 1, rotated),
            "one new Pod template naming the updated Secret's version",
        )
        controller.wait_quiescent()
        assert _template_versions(plane, namespace) == (generation + 1, rotated)
        secret_requests = [
            entry
            for entry in audit_entries(plane, since)
            if (entry.get("objectRef") or {}).get("resource") == "secrets"
        ]
        assert {entry["verb"] for entry in secret_requests} <= {"list", "watch"}
        logs = (tmp_path / "controller.log").read_text()
    assert "s3cr3t" not in logs


def test_without_roll_on_secret_change_a_secret_update_changes_nothing(
    plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    provider = {
        "type": "openai",
        "model": "m",
        "credentialsSecretRef": {"name": "api-key", "key": "token"},
    }
    apply(plane, _secret("api-key", namespace, "s3cr3t-one"))
    with running_controller(plane, tmp_path / "controller.log", *scoped(namespace)) as controller:
        apply(plane, runtime_manifest("rt", namespace, provider=provider))
        wait_condition(plane, "rt", namespace, "ConfigurationValid", "True", "ReferencesResolved")
        controller.wait_quiescent()
        before = _template_versions(plane, namespace)
        assert before[1] is None
        apply(plane, _secret("api-key", namespace, "s3cr3t-two"))
        controller.wait_quiescent()
        assert _template_versions(plane, namespace) == before
