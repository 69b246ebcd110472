"""Switching from the Go operator: field takeover, one rollout for the scratch space,
invalid stored runtimes (the Lease exclusion: tests/apiserver/test_go_operator_lease.py).

Each test starts from what the Go operator leaves behind (see go_operator.py)
and observes our controller only through the API server and its audit log.
"""

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from devcluster import ControlPlane
from devcluster.controller_harness import (
    Obj,
    apply,
    condition,
    events,
    get,
    must_get,
    reasons,
    running_controller,
    runtime_manifest,
    scoped,
    wait_condition,
    wait_for,
)
from devcluster.hostoperator import install_crds
from tests.support.go_operator import (
    GO_MANAGER,
    OWNED_KINDS,
    go_create,
    install_go_crd,
    install_our_crd,
    managers,
    render,
    rendered,
    watching,
    without_scratch,
)

ALWAYS_KEYS = {
    "TRUSSIUM_ENVIRONMENT",
    "TRUSSIUM_RUNTIME__HOST",
    "TRUSSIUM_RUNTIME__PORT",
    "TRUSSIUM_PROVIDER__NAME",
}


@pytest.fixture(autouse=True)
def crd(plane: ControlPlane) -> Iterator[None]:
    install_crds(plane)
    yield
    install_crds(plane)


def no_go_exclusion(namespace: str) -> str:
    """Point the Lease check at a namespace without the Go operator's Lease."""
    return f"--go-operator-lease-namespace={namespace}"


def replica_sets(plane: ControlPlane, name: str, namespace: str) -> set[str]:
    answer = plane.kubectl(
        "get", "rs", "-n", namespace, "-l", f"app.kubernetes.io/instance={name}", "-o", "json"
    )
    return {rs["metadata"]["name"] for rs in json.loads(answer.stdout)["items"]}


def when(
    plane: ControlPlane, kind: str, name: str, namespace: str, holds: Callable[[Obj], bool]
) -> Obj | None:
    """The object if `holds` holds for it, else None (for wait_for)."""
    obj = must_get(plane, kind, name, namespace)
    return obj if holds(obj) else None


def rolled_out(deployment: Obj) -> bool:
    """The current generation observed and every replica updated and available."""
    status, wanted = deployment.get("status") or {}, deployment["spec"]["replicas"]
    counts = ("replicas", "updatedReplicas", "readyReplicas", "availableReplicas")
    return status.get("observedGeneration") == deployment["metadata"]["generation"] and all(
        status.get(count) == wanted for count in counts
    )


def template(deployment: Obj) -> Obj:
    result: Obj = deployment["spec"]["template"]
    return result


@pytest.mark.cluster
@pytest.mark.own_plane(
    "kwok nodes (Pods of an image no registry serves turn Ready) and the audit log"
)
def test_switching_rolls_once_prunes_stale_values_and_keeps_what_others_own(
    plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    name = "rt"
    kubectl = plane.kubectl
    kubectl("create", "secret", "generic", "pull-a", "-n", namespace)
    optional = {
        "imagePullSecrets": [{"name": "pull-a"}],
        "runtime": {
            "providerRequestTimeoutSeconds": 30,
            "streamIdleTimeoutSeconds": 20,
            "shutdownDrainTimeoutSeconds": 10,
        },
        "service": {"port": 9100},
        "podMetadata": {"labels": {"team": "a"}, "annotations": {"note": "x"}},
        "networkPolicy": {"enabled": True, "ingress": [{"namespaceSelector": {}}]},
        "autoscaling": {"enabled": True, "minReplicas": 1, "maxReplicas": 3},
        "resources": {"requests": {"cpu": "100m"}},
    }
    provider = {"type": "ollama", "model": "m", "baseURL": "http://ollama:11434/v1"}
    apply(plane, runtime_manifest(name, namespace, provider=provider, **optional))
    for obj in rendered(plane, name, namespace):
        go_create(plane, obj)
    # Others' writes, which must survive: a label and an annotation, the autoscaler's
    # replica count (scale subresource) and `kubectl rollout restart`.
    kubectl("label", "configmap", name, "-n", namespace, "owner=platform")
    kubectl("annotate", "serviceaccount", name, "-n", namespace, "platform.example/owner=x")
    kubectl("scale", "deployment", name, "-n", namespace, "--replicas=2")
    kubectl("rollout", "restart", "deployment", name, "-n", namespace)

    def settled() -> Obj | None:
        deployment = must_get(plane, "deployment", name, namespace)
        status = deployment.get("status") or {}
        done = status.get("observedGeneration") == deployment["metadata"]["generation"]
        return deployment if done and status.get("readyReplicas") == 2 else None

    before = wait_for(settled, "the Go-era Deployment rolled out")
    sets_before = replica_sets(plane, name, namespace)
    restarted = template(before)["metadata"]["annotations"]["kubectl.kubernetes.io/restartedAt"]
    generation = before["metadata"]["generation"]

    with (
        watching(plane, name, namespace, tmp_path / "watch.log") as watch,
        running_controller(
            plane, tmp_path / "controller.log", *scoped(namespace), no_go_exclusion(namespace)
        ),
    ):
        for kind in OWNED_KINDS:
            wait_for(
                lambda k=kind: GO_MANAGER not in managers(plane, k, name, namespace),  # type: ignore[misc]
                f"{kind} taken over from {GO_MANAGER}",
            )
        # One rollout, for the scratch space: the only difference from the Go template.
        after = wait_for(
            lambda: when(
                plane, "deployment", name, namespace,
                lambda d: d["metadata"]["generation"] > generation and rolled_out(d),
            ),
            "the scratch space rolled out",
        )  # fmt: skip
        assert after["metadata"]["generation"] == generation + 1, "exactly one rollout"
        assert without_scratch(template(after)) == template(before)
        assert template(after)["spec"]["volumes"] == [
            {"name": "scratch", "emptyDir": {"sizeLimit": "1Gi"}}
        ]
        sets_after = replica_sets(plane, name, namespace)
        assert sets_before <= sets_after
        assert len(sets_after - sets_before) == 1, "one new ReplicaSet"
        assert after["spec"]["replicas"] == 2, "the autoscaler's replica count is kept"
        states = watch.states()
        assert min(state.available for state in states) >= 2, f"a replica unavailable: {states}"
        wait_condition(plane, name, namespace, "Ready", "True", "RuntimeReady")

        # The Go operator writes again (a rollback, say): taken over again, and what it
        # set that we do not render is pruned.
        kubectl(
            "label", "configmap", name, "-n", namespace, f"--field-manager={GO_MANAGER}", "go=again"
        )
        wait_for(
            lambda: "go" not in must_get(plane, "configmap", name, namespace)["metadata"]["labels"],
            "a reappearing legacy write taken over and pruned",
        )
        assert GO_MANAGER not in managers(plane, "configmap", name, namespace)

        # Every optional field removed: every stale value must go, in all 7 kinds.
        apply(plane, runtime_manifest(name, namespace, provider={"type": "ollama", "model": "m"}))
        for kind in ("networkpolicy", "horizontalpodautoscaler"):
            wait_for(lambda k=kind: get(plane, k, name, namespace) is None, f"{kind} deleted")  # type: ignore[misc]
        config = wait_for(
            lambda: when(
                plane, "configmap", name, namespace, lambda c: set(c["data"]) == ALWAYS_KEYS
            ),
            "stale ConfigMap keys pruned",
        )
        assert config["metadata"]["labels"]["owner"] == "platform"
        account = must_get(plane, "serviceaccount", name, namespace)
        assert "imagePullSecrets" not in account
        assert account["metadata"]["annotations"]["platform.example/owner"] == "x"
        service = must_get(plane, "service", name, namespace)
        assert [p["port"] for p in service["spec"]["ports"]] == [9000]
        deployment = wait_for(
            lambda: when(
                plane, "deployment", name, namespace, lambda d: d["spec"]["replicas"] == 1
            ),
            "replicas back to the spec's",
        )
        pod = template(deployment)
        assert "team" not in pod["metadata"]["labels"]
        assert "note" not in pod["metadata"]["annotations"]
        assert pod["metadata"]["annotations"]["kubectl.kubernetes.io/restartedAt"] == restarted
        assert "imagePullSecrets" not in pod["spec"]
        assert pod["spec"]["terminationGracePeriodSeconds"] == 36
        assert not pod["spec"]["containers"][0].get("resources")
        for kind in ("configmap", "serviceaccount", "service", "deployment", "poddisruptionbudget"):
            assert GO_MANAGER not in managers(plane, kind, name, namespace)


@pytest.mark.api
def test_invalid_stored_runtimes_are_reported_untouched_and_recover(
    plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    """Specs whose objects the API server refuses stay frozen (ADR 0024)."""
    toleration = runtime_manifest(
        "toleration",
        namespace,
        scheduling={"tolerations": [{"key": "gpu", "operator": "Exist"}]},
    )
    claims = runtime_manifest("claims", namespace, resources={"claims": [{"name": "GPU"}]})
    install_go_crd(plane)
    for runtime in (toleration, claims):
        plane.kubectl("create", "-f", "-", input=json.dumps(runtime))
    # What the Go operator left: the objects of the spec before the toleration was added,
    # since the API server refused its update of the Deployment.
    twin = must_get(plane, "trussiumruntime", "toleration", namespace)
    del twin["spec"]["scheduling"]
    objects = []
    for obj in render(twin):
        go_create(plane, obj)
        objects.append(obj["kind"].lower())
    versions = {
        k: must_get(plane, k, "toleration", namespace)["metadata"]["resourceVersion"]
        for k in objects
    }
    install_our_crd(plane)  # as the guide does before our controller starts

    with running_controller(
        plane, tmp_path / "controller.log", *scoped(namespace), no_go_exclusion(namespace)
    ):
        for name, path in (
            ("toleration", "spec.scheduling.tolerations[0].operator"),
            ("claims", "spec.resources.claims[0].name"),
        ):
            runtime = wait_condition(
                plane, name, namespace, "ConfigurationValid", "False", "InvalidSpec"
            )
            assert condition(runtime, "Ready") == ("False", "ConfigurationInvalid")
            assert condition(runtime, "Degraded") == ("True", "ConfigurationInvalid")
            assert condition(runtime, "Progressing") == ("False", "ConfigurationInvalid")
            status = runtime["status"]
            assert status["observedGeneration"] == runtime["metadata"]["generation"]
            valid = next(c for c in status["conditions"] if c["type"] == "ConfigurationValid")
            assert path in valid["message"]
            wait_for(
                lambda n=name: "ConfigurationInvalid" in reasons(plane, namespace, n),  # type: ignore[misc]
                f"{name}: a Warning event",
            )
        for kind, version in versions.items():
            live = must_get(plane, kind, "toleration", namespace)
            assert live["metadata"]["resourceVersion"] == version, f"{kind} was written"

        plane.kubectl(
            "patch", "trussiumruntime", "toleration", "-n", namespace, "--type=json",
            "-p", '[{"op":"replace","path":"/spec/scheduling/tolerations/0/operator",'
            '"value":"Exists"}]',
        )  # fmt: skip
        plane.kubectl(
            "patch", "trussiumruntime", "claims", "-n", namespace, "--type=json",
            "-p", '[{"op":"remove","path":"/spec/resources"}]',
        )  # fmt: skip
        for name in ("toleration", "claims"):
            wait_condition(
                plane, name, namespace, "ConfigurationValid", "True", "ReferencesResolved"
            )
            wait_for(
                lambda n=name: "RuntimeRecovered" in reasons(plane, namespace, n),  # type: ignore[misc]
                f"{name}: recovered",
            )
            assert reasons(plane, namespace, name).count("ConfigurationInvalid") == 1
        deployment = must_get(plane, "deployment", "toleration", namespace)
        assert template(deployment)["spec"]["tolerations"] == [{"key": "gpu", "operator": "Exists"}]
        assert GO_MANAGER not in managers(plane, "deployment", "toleration", namespace)


APPARMOR = "container.apparmor.security.beta.kubernetes.io/trussium"
SECCOMP = "container.seccomp.security.alpha.kubernetes.io/trussium"
# The Go operator's sample (config/samples in its repository), which enables autoscaling
# without a CPU request, as its documentation allows.
GO_SAMPLE: Obj = {
    "image": {"repository": "ghcr.io/trussiumhq/trussium", "tag": "v0.23.0"},
    "replicas": 2,
    "provider": {
        "type": "ollama",
        "model": "llama3.2",
        "baseURL": "http://ollama.ollama.svc.cluster.local:11434/v1",
    },
    "runtime": {"shutdownDrainTimeoutSeconds": 30},
    "service": {"type": "ClusterIP", "port": 9000},
    "networkPolicy": {
        "enabled": True,
        "ingress": [
            {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "clients"}},
                "podSelector": {"matchLabels": {"app.kubernetes.io/component": "gateway"}},
            }
        ],
    },
    "autoscaling": {"enabled": True, "minReplicas": 2, "maxReplicas": 5},
    "podMetadata": {
        "labels": {"team": "ai-platform"},
        "annotations": {"example.com/owner": "inference"},
    },
    "scheduling": {
        "nodeSelector": {"workload": "ai"},
        "tolerations": [
            {"key": "workload", "operator": "Equal", "value": "ai", "effect": "NoSchedule"}
        ],
    },
}
OLLAMA = {"type": "ollama", "model": "m", "baseURL": "http://ollama:11434/v1"}
# name -> (spec, the field path and the rule its warning names)
STRICTER: dict[str, tuple[Obj, str, str]] = {
    "go-sample": (GO_SAMPLE, "spec.autoscaling.enabled", "AutoscalingWithoutCPURequest"),
    "reserved-label": (
        {"podMetadata": {"labels": {"app.kubernetes.io/name": "legacy", "team": "a"}}},
        "spec.podMetadata.labels[app.kubernetes.io/name]",
        "ReservedPodLabel",
    ),
    "reserved-annotation": (
        {"podMetadata": {"annotations": {"runtime.trussium.io/owner": "a"}}},
        "spec.podMetadata.annotations[runtime.trussium.io/owner]",
        "ReservedPodAnnotation",
    ),
    "security": (
        {"podMetadata": {"annotations": {APPARMOR: "unconfined", SECCOMP: "unconfined"}}},
        f"spec.podMetadata.annotations[{APPARMOR}]",
        "SecurityProfileAnnotation",
    ),
    "credentials": (
        {"provider": OLLAMA | {"baseURL": "https://user:s3cret@ollama.example/v1"}},
        "spec.provider.baseURL",
        "BaseURLCredentials",
    ),
    "image": (
        {"image": {"repository": "Registry.Example.com/Trussium", "tag": "1.0.0"}},
        "spec.image.repository",
        "ImageReference",
    ),
    "scheme-less": (
        {"provider": OLLAMA | {"baseURL": "localhost:11434"}},
        "spec.provider.baseURL",
        "BaseURLNotHTTP",
    ),
}


@pytest.mark.api
def test_stored_runtimes_breaking_only_stricter_rules_keep_being_reconciled(
    plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    """Each spec the Go CRD admits that breaks only a rule this project added: taken over
    with no change but the scratch space every runtime gets, warned about (condition and
    event), and an image bump still reaches its Deployment; a runtime beside them sees
    nothing of it (ADR 0024)."""
    manifests = {
        name: runtime_manifest(name, namespace, **spec) for name, (spec, *_) in STRICTER.items()
    }
    bystander = runtime_manifest("bystander", namespace, provider=OLLAMA)
    install_go_crd(plane)  # the only schema that admits a scheme-less base URL
    plane.kubectl("create", "-f", "-", input=json.dumps(manifests.pop("scheme-less")))
    install_our_crd(plane)
    for manifest in (*manifests.values(), bystander):
        plane.kubectl("create", "-f", "-", input=json.dumps(manifest))
    names = [*STRICTER, "bystander"]
    for name in names:
        for obj in rendered(plane, name, namespace):
            go_create(plane, obj)
    go_era = {name: must_get(plane, "deployment", name, namespace) for name in names}

    with running_controller(
        plane, tmp_path / "controller.log", *scoped(namespace), no_go_exclusion(namespace)
    ) as controller:
        for name, (_, path, rule) in STRICTER.items():
            runtime = wait_condition(
                plane, name, namespace, "ConfigurationWarnings", "True", "AcceptedWithWarnings"
            )
            assert condition(runtime, "ConfigurationValid") == ("True", "ReferencesResolved")
            warned = next(
                c for c in runtime["status"]["conditions"] if c["type"] == "ConfigurationWarnings"
            )
            assert f"{path}: " in warned["message"], name
            assert f"[{rule}]" in warned["message"], name
            wait_for(
                lambda n=name: "AcceptedWithWarnings" in reasons(plane, namespace, n),  # type: ignore[misc]
                f"{name}: a Warning event",
            )
            wait_for(
                lambda n=name: GO_MANAGER not in managers(plane, "deployment", n, namespace),  # type: ignore[misc]
                f"{name}: taken over",
            )
        wait_for(
            lambda: GO_MANAGER not in managers(plane, "deployment", "bystander", namespace),
            "bystander: taken over",
        )
        for name in names:  # the scratch space (ADR 0019), and nothing else
            deployment = must_get(plane, "deployment", name, namespace)
            before = go_era[name]
            assert deployment["metadata"]["generation"] == before["metadata"]["generation"] + 1
            assert without_scratch(template(deployment)) == template(before), f"{name} changed"
        seen = json.dumps(events(plane, namespace, "credentials")) + json.dumps(
            must_get(plane, "trussiumruntime", "credentials", namespace)["status"]
        )
        assert "s3cret" not in seen + controller.logs()

        for name in STRICTER:
            plane.kubectl(
                "patch", "trussiumruntime", name, "-n", namespace, "--type=merge",
                "-p", '{"spec":{"image":{"tag":"bumped"}}}',
            )  # fmt: skip
        for name in STRICTER:
            wait_for(
                lambda n=name: when(  # type: ignore[misc]
                    plane, "deployment", n, namespace,
                    lambda d: template(d)["spec"]["containers"][0]["image"].endswith(":bumped"),
                ),
                f"{name}: the image bump reached its Deployment",
            )  # fmt: skip
            assert reasons(plane, namespace, name).count("AcceptedWithWarnings") == 1

        runtime = must_get(plane, "trussiumruntime", "bystander", namespace)
        assert condition(runtime, "ConfigurationValid") == ("True", "ReferencesResolved")
        assert condition(runtime, "ConfigurationWarnings") == ("", "")
        assert "AcceptedWithWarnings" not in reasons(plane, namespace, "bystander")
        deployment = must_get(plane, "deployment", "bystander", namespace)
        assert (
            deployment["metadata"]["generation"]
            == go_era["bystander"]["metadata"]["generation"] + 1
        )
