"""The controller on the cluster profile: real rollouts on kwok nodes, garbage collection.

Each test starts its own controller restricted to the test's namespace, so
tests never see each other's runtimes.
"""

import hashlib
import json
import re
import signal
from pathlib import Path

import pytest

from devcluster import ControlPlane
from devcluster.controller_harness import (
    IMAGE,
    Controller,
    Obj,
    apply,
    audit_entries,
    condition,
    fill_pod_quota,
    get,
    lease_renewals,
    must_get,
    now,
    reasons,
    running_controller,
    runtime_manifest,
    scoped,
    wait_condition,
    wait_for,
    writes,
)
from devcluster.hostoperator import install_crds

OWN_PLANE = pytest.mark.own_plane(
    "kwok nodes (Pods of an image no registry serves turn Ready) and the audit log"
)
pytestmark = [pytest.mark.cluster, OWN_PLANE]
OWNED_KINDS = ("configmap", "serviceaccount", "service", "deployment", "poddisruptionbudget")
# The idle window, counted in the controller's own Lease renewals (one per 2 s retry period).
IDLE_RENEWALS = 5
UPGRADE_EVENTS = {"RuntimeUpgradeStarted", "RuntimeUpgradeCompleted", "RuntimeUpgradeFailed"}


@pytest.fixture(autouse=True)
def crd(plane: ControlPlane) -> None:
    install_crds(plane)


def checksum(plane: ControlPlane, name: str, namespace: str) -> str:
    deployment = must_get(plane, "deployment", name, namespace)
    annotations = deployment["spec"]["template"]["metadata"]["annotations"]
    return str(annotations["runtime.trussium.io/config-checksum"])


def revision(plane: ControlPlane, name: str, namespace: str) -> str:
    deployment = must_get(plane, "deployment", name, namespace)
    return str(
        deployment["metadata"].get("annotations", {}).get("deployment.kubernetes.io/revision")
    )


def wait_ready(plane: ControlPlane, name: str, namespace: str, image: str) -> Obj:
    """Ready=True with the given image rolled out (a status of the new spec, not the old one)."""

    def check() -> Obj | None:
        runtime = get(plane, "trussiumruntime", name, namespace) or {}
        status = runtime.get("status") or {}
        generation = runtime.get("metadata", {}).get("generation")
        done = (
            condition(runtime, "Ready") == ("True", "RuntimeReady")
            and status.get("observedGeneration") == generation
            and status.get("currentImage") == image
        )
        return runtime if done else None

    return wait_for(check, f"{namespace}/{name} Ready with {image}", timeout=120)


def columns(plane: ControlPlane, name: str, namespace: str) -> dict[str, str]:
    """`kubectl get truntime`'s default columns for one runtime, blank cells included."""
    header, row = plane.kubectl("get", "truntime", name, "-n", namespace).stdout.splitlines()
    starts = [(m.group(), m.start()) for m in re.finditer(r"\S+", header)]
    ends = [start for _, start in starts[1:]] + [len(row)]
    return {title: row[start:end].strip() for (title, start), end in zip(starts, ends, strict=True)}


def test_provision_configure_upgrade_idle_and_delete(
    plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    name = "rt"
    with running_controller(plane, tmp_path / "controller.log", *scoped(namespace)) as controller:
        apply(
            plane,
            runtime_manifest(
                name,
                namespace,
                provider={
                    "type": "ollama",
                    "model": "gpt-4o-mini",
                    "baseURL": "https://api.example.com/v1",
                },
            ),
        )

        # Provisioning: every managed object, contract content, owner reference.
        runtime = wait_ready(plane, name, namespace, f"{IMAGE}:1.0.0")
        uid = runtime["metadata"]["uid"]
        for kind in OWNED_KINDS:
            obj = must_get(plane, kind, name, namespace)
            labels = obj["metadata"]["labels"]
            assert labels["app.kubernetes.io/managed-by"] == "trussium-operator", kind
            assert labels["app.kubernetes.io/instance"] == name, kind
            (owner,) = obj["metadata"]["ownerReferences"]
            assert (owner["kind"], owner["uid"], owner["controller"]) == (
                "TrussiumRuntime",
                uid,
                True,
            ), kind
            assert owner["blockOwnerDeletion"] is True, kind
        config = must_get(plane, "configmap", name, namespace)["data"]
        assert config["TRUSSIUM_PROVIDER__BASE_URL"] == "https://api.example.com/v1"
        encoded = "".join(
            f"{len(k.encode())}:{k}:{len(v.encode())}:{v};" for k, v in sorted(config.items())
        )
        assert checksum(plane, name, namespace) == hashlib.sha256(encoded.encode()).hexdigest()
        assert get(plane, "networkpolicy", name, namespace) is None
        assert get(plane, "horizontalpodautoscaler", name, namespace) is None
        status = runtime["status"]
        assert status["lastSuccessfulImage"] == f"{IMAGE}:1.0.0"
        assert status["endpoint"] == f"http://{name}.{namespace}.svc.cluster.local:9000"
        assert condition(runtime, "Upgrading") == ("False", "NoUpgrade")
        # Progressing may be announced once per reason (generation pending, then progressing).
        seen = reasons(plane, namespace, name)
        assert (seen[0], seen[-1]) == ("RuntimeProgressing", "RuntimeReady"), seen
        assert set(seen) == {"RuntimeProgressing", "RuntimeReady"}, seen
        assert seen.count("RuntimeReady") == 1, seen

        # A configuration change rolls out a new ReplicaSet but is no upgrade.
        old_checksum = checksum(plane, name, namespace)
        apply(
            plane,
            runtime_manifest(
                name,
                namespace,
                provider={
                    "type": "ollama",
                    "model": "gpt-4o-mini",
                    "baseURL": "https://other.example.com/v1",
                },
            ),
        )
        wait_for(lambda: checksum(plane, name, namespace) != old_checksum, "a new checksum")
        wait_for(lambda: revision(plane, name, namespace) == "2", "a second ReplicaSet revision")
        runtime = wait_ready(plane, name, namespace, f"{IMAGE}:1.0.0")
        assert runtime["status"]["lastSuccessfulImage"] == f"{IMAGE}:1.0.0"
        assert not UPGRADE_EVENTS & set(reasons(plane, namespace, name))

        # Image changes are upgrades, by tag and by digest.
        base = {
            "provider": {
                "type": "ollama",
                "model": "gpt-4o-mini",
                "baseURL": "https://other.example.com/v1",
            }
        }
        digest = "sha256:" + "a" * 64
        for image, wanted in (
            ({"repository": IMAGE, "tag": "1.1.0"}, f"{IMAGE}:1.1.0"),
            ({"repository": IMAGE, "digest": digest}, f"{IMAGE}@{digest}"),
        ):
            apply(plane, runtime_manifest(name, namespace, image=image, **base))
            wait_ready(plane, name, namespace, wanted)
            runtime = wait_condition(
                plane, name, namespace, "Upgrading", "False", "UpgradeComplete"
            )
            assert runtime["status"]["lastSuccessfulImage"] == wanted
        upgrade_reasons = [r for r in reasons(plane, namespace, name) if r in UPGRADE_EVENTS]
        assert upgrade_reasons == ["RuntimeUpgradeStarted", "RuntimeUpgradeCompleted"] * 2

        # Idle: nothing changes, so the controller writes nothing and says nothing, while
        # its Lease renewals show it alive and writing all along.
        controller.wait_quiescent()
        event_count = len(reasons(plane, namespace, name))
        since = now()
        wait_for(
            lambda: lease_renewals(audit_entries(plane, since)) >= IDLE_RENEWALS,
            f"{IDLE_RENEWALS} Lease renewals",
        )
        assert writes(audit_entries(plane, since)) == []
        assert len(reasons(plane, namespace, name)) == event_count

        # Deleting the runtime deletes everything it owned (garbage collection).
        plane.kubectl("delete", "trussiumruntime", name, "-n", namespace, "--wait=true")
        for kind in OWNED_KINDS:
            wait_for(lambda k=kind: get(plane, k, name, namespace) is None, f"{kind} deleted")  # type: ignore[misc]


def test_failed_upgrade_is_reported_once_and_recovers(
    plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    name = "rt"
    with running_controller(plane, tmp_path / "controller.log", *scoped(namespace)) as controller:
        apply(plane, runtime_manifest(name, namespace))
        wait_ready(plane, name, namespace, f"{IMAGE}:1.0.0")
        fill_pod_quota(plane, namespace, 1)
        apply(plane, runtime_manifest(name, namespace, image={"repository": IMAGE, "tag": "2.0.0"}))
        runtime = wait_condition(plane, name, namespace, "Upgrading", "False", "UpgradeFailed")
        assert condition(runtime, "Degraded") == ("True", "ReplicaFailure")
        status = runtime["status"]
        assert status["lastSuccessfulImage"] == f"{IMAGE}:1.0.0"
        assert runtime["spec"]["image"]["tag"] == "2.0.0", "a failed upgrade keeps the spec"
        controller.wait_quiescent()
        assert reasons(plane, namespace, name).count("RuntimeUpgradeFailed") == 1

        plane.kubectl("delete", "resourcequota", "pods-1", "-n", namespace)
        runtime = wait_ready(plane, name, namespace, f"{IMAGE}:2.0.0")
        wait_condition(plane, name, namespace, "Upgrading", "False", "UpgradeComplete")
        wait_condition(plane, name, namespace, "Degraded", "False", "AsExpected")
        seen = reasons(plane, namespace, name)
        assert "RuntimeRecovered" in seen
        assert seen.count("RuntimeUpgradeFailed") == 1


def test_scaling_autoscaling_and_network_policy(
    plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    name = "rt"
    cpu = {"requests": {"cpu": "100m"}}
    with running_controller(plane, tmp_path / "controller.log", *scoped(namespace)) as controller:
        apply(plane, runtime_manifest(name, namespace, resources=cpu))
        wait_ready(plane, name, namespace, f"{IMAGE}:1.0.0")

        apply(plane, runtime_manifest(name, namespace, resources=cpu, replicas=0))
        wait_condition(plane, name, namespace, "Ready", "True", "ScaledToZero")
        assert "RuntimeScaledToZero" in reasons(plane, namespace, name)
        shown = columns(plane, name, namespace)
        assert (shown["READY"], shown["DESIRED"], shown["TARGET"]) == ("", "0", "0")
        apply(plane, runtime_manifest(name, namespace, resources=cpu, replicas=1))
        wait_condition(plane, name, namespace, "Ready", "True", "RuntimeReady")

        # Autoscaling on: the HPA owns the count (it raises it to minReplicas) and the
        # controller, reconciling again on the Deployment's changes, never takes it back.
        autoscaling = {"enabled": True, "minReplicas": 2, "maxReplicas": 4}
        apply(plane, runtime_manifest(name, namespace, resources=cpu, autoscaling=autoscaling))
        hpa = wait_for(lambda: get(plane, "hpa", name, namespace), "the HPA")
        assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (2, 4)
        wait_for(
            lambda: must_get(plane, "deployment", name, namespace)["spec"]["replicas"] == 2,
            "the HPA to scale to minReplicas",
        )
        runtime = wait_for(
            lambda: (
                (r := get(plane, "trussiumruntime", name, namespace))
                and (r.get("status") or {}).get("readyReplicas") == 2
                and condition(r, "Ready") == ("True", "RuntimeReady")
                and r
            ),
            "2 of 2 ready under the HPA",
        )
        assert runtime
        controller.wait_quiescent()
        assert must_get(plane, "deployment", name, namespace)["spec"]["replicas"] == 2
        # Desired is spec.replicas (the contract's column); Target the HPA's count.
        hpa = must_get(plane, "hpa", name, namespace)
        assert hpa["status"]["desiredReplicas"] == 2
        shown = columns(plane, name, namespace)
        assert (shown["READY"], shown["DESIRED"], shown["TARGET"]) == ("2", "1", "2")

        # Scaled by hand past maxReplicas, the HPA brings it back to 4 by itself, and
        # Target follows the HPA, not spec.replicas or the hand scale.
        plane.kubectl("scale", "deployment", name, "-n", namespace, "--replicas=6")
        wait_for(
            lambda: (
                (get(plane, "hpa", name, namespace) or {}).get("status", {}).get("desiredReplicas")
                == 4
            ),
            "the HPA's count at maxReplicas",
        )
        wait_for(
            lambda: columns(plane, name, namespace)["TARGET"] == "4",
            "Target at the HPA's count",
        )
        assert columns(plane, name, namespace)["DESIRED"] == "1"
        assert must_get(plane, "deployment", name, namespace)["spec"]["replicas"] == 4

        # Autoscaling off: the HPA goes, the spec's count comes back.
        apply(plane, runtime_manifest(name, namespace, resources=cpu))
        wait_for(lambda: get(plane, "hpa", name, namespace) is None, "the HPA deleted")
        wait_for(
            lambda: must_get(plane, "deployment", name, namespace)["spec"]["replicas"] == 1,
            "spec.replicas restored",
        )
        wait_for(lambda: columns(plane, name, namespace)["TARGET"] == "1", "Target back to 1")

        policy = {"enabled": True, "ingress": [{"namespaceSelector": {"matchLabels": {"a": "b"}}}]}
        apply(plane, runtime_manifest(name, namespace, resources=cpu, networkPolicy=policy))
        netpol = wait_for(lambda: get(plane, "networkpolicy", name, namespace), "the NetworkPolicy")
        assert netpol["spec"]["ingress"][0]["ports"] == [{"port": 9000, "protocol": "TCP"}]
        apply(plane, runtime_manifest(name, namespace, resources=cpu))
        wait_for(lambda: get(plane, "networkpolicy", name, namespace) is None, "NP deleted")


def test_drift_is_undone_but_a_rollout_restart_is_kept(
    plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    name = "rt"
    policy = {"enabled": True, "ingress": [{"namespaceSelector": {}}]}
    autoscaling = {"enabled": True, "minReplicas": 1, "maxReplicas": 3}
    spec = {
        "networkPolicy": policy,
        "autoscaling": autoscaling,
        "resources": {"requests": {"cpu": "100m"}},
    }
    with running_controller(plane, tmp_path / "controller.log", *scoped(namespace)):
        apply(plane, runtime_manifest(name, namespace, **spec))
        wait_ready(plane, name, namespace, f"{IMAGE}:1.0.0")

        edits = {
            "configmap": (
                {"data": {"TRUSSIUM_ENVIRONMENT": "dev"}},
                lambda o: o["data"]["TRUSSIUM_ENVIRONMENT"] == "production",
            ),
            "serviceaccount": (
                {"automountServiceAccountToken": True},
                lambda o: o["automountServiceAccountToken"] is False,
            ),
            "service": ({"spec": {"type": "NodePort"}}, lambda o: o["spec"]["type"] == "ClusterIP"),
            "deployment": (
                {
                    "spec": {
                        "template": {
                            "spec": {"containers": [{"name": "trussium", "image": "evil:1"}]}
                        }
                    }
                },
                lambda o: (
                    o["spec"]["template"]["spec"]["containers"][0]["image"] == f"{IMAGE}:1.0.0"
                ),
            ),
            "poddisruptionbudget": (
                {"spec": {"maxUnavailable": 3}},
                lambda o: o["spec"]["maxUnavailable"] == 1,
            ),
            "networkpolicy": (
                {"spec": {"policyTypes": ["Ingress", "Egress"]}},
                lambda o: o["spec"]["policyTypes"] == ["Ingress"],
            ),
            "horizontalpodautoscaler": (
                {"spec": {"maxReplicas": 9}},
                lambda o: o["spec"]["maxReplicas"] == 3,
            ),
        }
        for kind, (patch, restored) in edits.items():
            plane.kubectl(
                "patch", kind, name, "-n", namespace, "--type=strategic", "-p", json.dumps(patch)
            )
            wait_for(
                lambda k=kind, r=restored: r(must_get(plane, k, name, namespace)),  # type: ignore[misc]
                f"{kind} restored",
            )
        for kind in edits:
            uid = must_get(plane, kind, name, namespace)["metadata"]["uid"]
            plane.kubectl("delete", kind, name, "-n", namespace, "--wait=false")
            wait_for(
                lambda k=kind, u=uid: (
                    (o := get(plane, k, name, namespace))  # type: ignore[misc]
                    and o["metadata"]["uid"] != u
                ),
                f"{kind} recreated",
            )
        wait_ready(plane, name, namespace, f"{IMAGE}:1.0.0")

        # A sidecar, an init container, a volume and an env var added by hand all go.
        sidecar = {
            "spec": {
                "template": {
                    "spec": {
                        "containers": [
                            {"name": "sidecar", "image": "busybox"},
                            {"name": "trussium", "env": [{"name": "DEBUG", "value": "1"}]},
                        ],
                        "initContainers": [{"name": "init", "image": "busybox"}],
                        "volumes": [{"name": "debug", "emptyDir": {}}],
                    }
                }
            }
        }
        plane.kubectl(
            "patch",
            "deployment",
            name,
            "-n",
            namespace,
            "--type=strategic",
            "-p",
            json.dumps(sidecar),
        )

        def clean() -> bool:
            pod = must_get(plane, "deployment", name, namespace)["spec"]["template"]["spec"]
            if len(pod["containers"]) != 1:
                return False
            (container,) = pod["containers"]
            return (
                container["name"] == "trussium"
                and container["env"] == [{"name": "TMPDIR", "value": "/tmp"}]
                and "initContainers" not in pod
                and [v["name"] for v in pod["volumes"]] == ["scratch"]
            )

        wait_for(clean, "the pod template back to the contract")

        # `kubectl rollout restart` rolls out new pods and stays.
        before = revision(plane, name, namespace)
        plane.kubectl("rollout", "restart", f"deployment/{name}", "-n", namespace)
        wait_for(lambda: revision(plane, name, namespace) != before, "a restart rollout")
        plane.kubectl("rollout", "status", f"deployment/{name}", "-n", namespace, "--timeout=90s")
        # Another reconcile (a spec change of the runtime) still keeps the annotation.
        apply(
            plane,
            runtime_manifest(
                name, namespace, replicas=1, **spec | {"podMetadata": {"labels": {"team": "a"}}}
            ),
        )
        wait_for(
            lambda: (
                must_get(plane, "deployment", name, namespace)["spec"]["template"]["metadata"][
                    "labels"
                ].get("team")
                == "a"
            ),
            "the new pod label",
        )
        annotations = must_get(plane, "deployment", name, namespace)["spec"]["template"][
            "metadata"
        ]["annotations"]
        assert "kubectl.kubernetes.io/restartedAt" in annotations


def test_restart_mid_rollout_loses_and_duplicates_nothing(
    plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    name = "rt"
    log = tmp_path / "controller.log"
    args = (*scoped(namespace), "--no-leader-elect")
    with running_controller(plane, log, *args):
        apply(plane, runtime_manifest(name, namespace))
        wait_ready(plane, name, namespace, f"{IMAGE}:1.0.0")
    first = Controller(plane, log, *args)
    try:
        first.wait_ready()
        # Paused, the rollout cannot finish before the kill (kwok may otherwise complete
        # it between two polls); pausing is the user's right, the operator leaves it alone.
        deployment = f"deployment/{name}"
        plane.kubectl("rollout", "pause", deployment, "-n", namespace)
        new_image = {"repository": IMAGE, "tag": "1.1.0"}
        apply(plane, runtime_manifest(name, namespace, image=new_image))
        wait_condition(plane, name, namespace, "Upgrading", "True", "UpgradeInProgress")
        first.signal(signal.SIGKILL)
    finally:
        first.process.kill()  # no-op after the SIGKILL; stops it if the test failed first
        first.process.wait()
    with running_controller(plane, log, *args) as second:
        plane.kubectl("rollout", "resume", deployment, "-n", namespace)
        wait_ready(plane, name, namespace, f"{IMAGE}:1.1.0")
        wait_condition(plane, name, namespace, "Upgrading", "False", "UpgradeComplete")
        second.wait_quiescent()
        seen = reasons(plane, namespace, name)
    assert seen.count("RuntimeUpgradeStarted") == 1
    assert seen.count("RuntimeUpgradeCompleted") == 1
