"""The controller on the api profile (no Deployment controller): states the test sets by
patching Deployment status, references, leader election and namespace restriction."""

import json
import signal
import time
from pathlib import Path

import pytest

from devcluster import ControlPlane
from devcluster.controller_harness import (
    Controller,
    apply,
    audit_entries,
    condition,
    events,
    get,
    must_get,
    now,
    patch_status,
    reasons,
    running_controller,
    runtime_manifest,
    sample_sum,
    scoped,
    wait_condition,
    wait_for,
)
from devcluster.hostoperator import install_crds

pytestmark = pytest.mark.api
MANAGED = ("configmap", "serviceaccount", "service", "deployment", "poddisruptionbudget")
# Short, so failover tests stay quick; the ratios are the defaults' (15/10/2).
LEASE = ("--lease-duration=6", "--renew-deadline=4", "--retry-period=1")


@pytest.fixture(autouse=True)
def crd(plane: ControlPlane) -> None:
    install_crds(plane)


def patch_deployment_status(
    plane: ControlPlane, name: str, namespace: str, status: dict[str, object]
) -> None:
    patch_status(plane.kubectl, "deployment", name, namespace, status)


def test_progress_deadline_exceeded_degrades_the_runtime(
    plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    name = "rt"
    with running_controller(plane, tmp_path / "controller.log", *scoped(namespace)):
        apply(plane, runtime_manifest(name, namespace))
        wait_condition(plane, name, namespace, "Progressing", "True", "DeploymentGenerationPending")
        generation = must_get(plane, "deployment", name, namespace)["metadata"]["generation"]
        message = 'ReplicaSet "rt-1" has timed out progressing.'
        patch_deployment_status(
            plane,
            name,
            namespace,
            {
                "observedGeneration": generation,
                "replicas": 1,
                "unavailableReplicas": 1,
                "conditions": [
                    {
                        "type": "Progressing",
                        "status": "False",
                        "reason": "ProgressDeadlineExceeded",
                        "message": message,
                        "lastUpdateTime": "2026-01-01T00:00:00Z",
                        "lastTransitionTime": "2026-01-01T00:00:00Z",
                    }
                ],
            },
        )
        runtime = wait_condition(
            plane, name, namespace, "Degraded", "True", "ProgressDeadlineExceeded"
        )
        assert condition(runtime, "Ready") == ("False", "DeploymentFailed")
        assert condition(runtime, "Progressing") == ("False", "DeploymentFailed")
        ready = next(c for c in runtime["status"]["conditions"] if c["type"] == "Ready")
        assert ready["message"] == message
        wait_for(lambda: "RuntimeDegraded" in reasons(plane, namespace, name), "RuntimeDegraded")


def test_missing_secret_blocks_everything_until_it_exists(
    plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    name = "rt"
    provider = {
        "type": "openai",
        "model": "m",
        "credentialsSecretRef": {"name": "api-key", "key": "token"},
    }
    with running_controller(plane, tmp_path / "controller.log", *scoped(namespace)) as controller:
        apply(plane, runtime_manifest(name, namespace, provider=provider))
        runtime = wait_condition(
            plane, name, namespace, "ConfigurationValid", "False", "SecretNotFound"
        )
        assert condition(runtime, "Ready") == ("False", "ConfigurationInvalid")
        assert condition(runtime, "Degraded") == ("True", "ConfigurationInvalid")
        message = next(
            c for c in runtime["status"]["conditions"] if c["type"] == "ConfigurationValid"
        )["message"]
        assert "api-key" in message
        for kind in MANAGED:
            assert get(plane, kind, name, namespace) is None, (
                f"{kind} created despite the missing Secret"
            )
        controller.wait_quiescent()
        assert reasons(plane, namespace, name).count("ConfigurationInvalid") == 1

        secret = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "api-key", "namespace": namespace},
            "stringData": {"token": "s3cr3t-value"},
        }
        apply(plane, secret)
        wait_condition(plane, name, namespace, "ConfigurationValid", "True", "ReferencesResolved")
        deployment = must_get(plane, "deployment", name, namespace)
        env, tmpdir = deployment["spec"]["template"]["spec"]["containers"][0]["env"]
        assert tmpdir == {"name": "TMPDIR", "value": "/tmp"}
        assert env["valueFrom"]["secretKeyRef"] == {"name": "api-key", "key": "token"}
        logs = (tmp_path / "controller.log").read_text()
    assert "s3cr3t-value" not in logs
    for event in events(plane, namespace, name):
        assert "s3cr3t" not in json.dumps(event)


def test_a_secret_that_existed_before_its_runtime_is_found_by_a_metadata_only_lookup(
    plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    """The Secret cache keeps only referenced Secrets (ADR 0016): a Secret created while
    nothing referenced it is not cached, so the runtime naming it later has it looked up
    by name, as metadata, and proceeds without ever reporting it missing."""
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "api-key", "namespace": namespace},
        "stringData": {"token": "s3cr3t-value"},
    }
    provider = {
        "type": "openai",
        "model": "m",
        "credentialsSecretRef": {"name": "api-key", "key": "token"},
    }
    with running_controller(plane, tmp_path / "controller.log", *scoped(namespace)) as controller:
        apply(plane, secret)
        controller.wait_quiescent()
        since = now()
        apply(plane, runtime_manifest("rt", namespace, provider=provider))
        wait_condition(plane, "rt", namespace, "ConfigurationValid", "True", "ReferencesResolved")
        must_get(plane, "deployment", "rt", namespace)
        lookups = [
            e
            for e in audit_entries(plane, since)
            if e.get("verb") == "list"
            and (e.get("objectRef") or {}).get("resource") == "secrets"
            and "fieldSelector=metadata.name%3Dapi-key" in e.get("requestURI", "")
        ]
        assert [e["responseStatus"]["code"] for e in lookups] == [200]
        logs = (tmp_path / "controller.log").read_text()
    assert "ConfigurationInvalid" not in reasons(plane, namespace, "rt"), "reported missing"
    assert "s3cr3t-value" not in logs


def test_watch_namespace_ignores_other_namespaces(
    plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    other = f"{namespace[:50]}-other"
    plane.create_namespace(other)
    try:
        log = tmp_path / "controller.log"
        with running_controller(plane, log, *scoped(namespace)) as controller:
            apply(plane, runtime_manifest("elsewhere", other))
            apply(plane, runtime_manifest("here", namespace))
            wait_for(
                lambda: get(plane, "configmap", "here", namespace), "the watched runtime reconciled"
            )
            controller.wait_quiescent()
            assert get(plane, "configmap", "elsewhere", other) is None
            assert not (must_get(plane, "trussiumruntime", "elsewhere", other).get("status"))
    finally:
        plane.delete_namespace(other)


def lease_holder(plane: ControlPlane, lease_namespace: str, lease: str) -> str:
    obj = get(plane, "lease", lease, lease_namespace)
    return str(((obj or {}).get("spec") or {}).get("holderIdentity") or "")


def test_leader_election_one_reconciles_and_failover(
    plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    lease = "trussium-leader-test"
    common = (*scoped(namespace), f"--leader-election-id={lease}", *LEASE)
    log = tmp_path / "controllers.log"
    a = Controller(plane, log, *common, identity="a")
    b = Controller(plane, log, *common, identity="b")
    started = [a, b]
    try:
        a.wait_ready()
        b.wait_ready()
        leader = wait_for(lambda: lease_holder(plane, namespace, lease), "a leader")
        first, second = (a, b) if leader == "a" else (b, a)
        apply(plane, runtime_manifest("one", namespace))
        wait_for(lambda: get(plane, "configmap", "one", namespace), "reconciled by the leader")
        assert sample_sum(second.scrape(), "controller_runtime_reconcile_total") == 0, (
            "the standby reconciled"
        )
        assert first.metric("leader_election_master_status") == 1
        assert sample_sum(second.scrape(), "leader_election_master_status") == 0
        # One series set per runtime: the leader's (the standby's cache holds the same).
        wait_for(lambda: first.metric("trussium_runtime_info", runtime_name="one"), "its series")
        assert sample_sum(second.scrape(), "trussium_runtime_info", runtime_name="one") == 0

        # SIGKILL: the standby takes over once the lease runs out.
        killed_at = time.monotonic()
        first.signal(signal.SIGKILL)
        first.process.wait()
        wait_for(lambda: lease_holder(plane, namespace, lease) == second.identity, "takeover", 20)
        assert time.monotonic() - killed_at < 6 + 2 + 1, "takeover within the lease duration"
        apply(plane, runtime_manifest("two", namespace))
        wait_for(lambda: get(plane, "configmap", "two", namespace), "reconciled by the new leader")
        assert second.metric("trussium_runtime_info", runtime_name="one") == 1

        # SIGTERM: the lease is released, a fresh standby takes over at once.
        third = Controller(plane, log, *common, identity="c")
        started.append(third)
        third.wait_ready()
        time.sleep(1)
        stopped_at = time.monotonic()
        assert second.stop() == 0
        wait_for(lambda: lease_holder(plane, namespace, lease) == "c", "handover", 10)
        assert time.monotonic() - stopped_at < 4, "handover well before the lease would expire"
        third.stop()
    except BaseException:
        print(log.read_text()[-8000:])
        raise
    finally:
        for controller in started:
            controller.process.kill()
            controller.process.wait()


def test_a_failed_apply_is_reported_retried_and_recovered(
    plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    """An admission policy rejects the PodDisruptionBudget: the reconcile fails visibly."""
    policy = f"deny-pdb-{namespace}"[:63]
    manifests = [
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": policy},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {
                    "resourceRules": [
                        {
                            "apiGroups": ["policy"],
                            "apiVersions": ["v1"],
                            "operations": ["CREATE", "UPDATE"],
                            "resources": ["poddisruptionbudgets"],
                        }
                    ]
                },
                "validations": [{"expression": "false", "message": "PDBs are frozen"}],
            },
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": policy},
            "spec": {
                "policyName": policy,
                "validationActions": ["Deny"],
                "matchResources": {
                    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
                },
            },
        },
    ]
    for manifest in manifests:
        apply(plane, manifest)
    probe = json.dumps(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "probe", "namespace": namespace},
            "spec": {"maxUnavailable": 1},
        }
    )
    wait_for(
        lambda: (
            plane.kubectl(
                "create", "--dry-run=server", "-f", "-", input=probe, check=False
            ).returncode
            != 0
        ),
        "the admission policy to take effect",
    )
    name = "rt"
    try:
        with running_controller(plane, tmp_path / "controller.log", *scoped(namespace)):
            apply(plane, runtime_manifest(name, namespace))
            runtime = wait_condition(
                plane, name, namespace, "Degraded", "True", "ReconciliationFailed"
            )
            assert condition(runtime, "ConfigurationValid") == ("True", "ReferencesResolved")
            assert condition(runtime, "Ready") == ("False", "ReconciliationFailed")
            wait_for(
                lambda: "ReconciliationFailed" in reasons(plane, namespace, name),
                "a ReconciliationFailed Warning",
            )
            (failure,) = {
                e["type"]
                for e in events(plane, namespace, name)
                if e["reason"] == "ReconciliationFailed"
            }
            assert failure == "Warning"

            plane.kubectl("delete", "validatingadmissionpolicybinding", policy)
            wait_for(lambda: get(plane, "poddisruptionbudget", name, namespace), "the PDB")
            wait_condition(plane, name, namespace, "Degraded", "False", "AsExpected", timeout=120)
            assert "RuntimeRecovered" in reasons(plane, namespace, name)
    finally:
        plane.kubectl("delete", "validatingadmissionpolicy", policy, check=False)
        plane.kubectl("delete", "validatingadmissionpolicybinding", policy, check=False)


def test_a_leader_frozen_past_its_renew_deadline_exits_instead_of_reconciling(
    plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    lease = "trussium-frozen-test"
    flags = (*scoped(namespace), f"--leader-election-id={lease}", *LEASE)
    log = tmp_path / "controllers.log"
    a = Controller(plane, log, *flags, identity="a")
    b: Controller | None = None
    try:
        a.wait_ready()
        wait_for(lambda: lease_holder(plane, namespace, lease) == "a", "a leading")
        b = Controller(plane, log, *flags, identity="b")
        b.wait_ready()
        a.signal(signal.SIGSTOP)
        wait_for(lambda: lease_holder(plane, namespace, lease) == "b", "b taking over", 20)
        apply(plane, runtime_manifest("rt", namespace))
        a.signal(signal.SIGCONT)
        assert a.process.wait(10) == 1, "a leader that lost its lease exits non-zero"
        wait_for(lambda: get(plane, "configmap", "rt", namespace), "reconciled by b")
        instances = {e["reportingInstance"] for e in events(plane, namespace, "rt")}
        assert instances <= {"b"}, f"the frozen leader reconciled: {instances}"
        b.stop()
    except BaseException:
        print(log.read_text()[-8000:])
        raise
    finally:
        for controller in (a, b):
            if controller is not None:
                controller.process.kill()
                controller.process.wait()


def test_hand_edited_service_port_is_restored(
    plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    """A port edited by hand re-keys the ports list under another field manager;
    applying ours beside it would duplicate the `http` name, so the operator
    removes the foreign entry and the Service converges back to the contract."""
    name = "rt"
    with running_controller(plane, tmp_path / "controller.log", *scoped(namespace)):
        apply(plane, runtime_manifest(name, namespace))
        wait_for(lambda: get(plane, "service", name, namespace), "the Service")
        edit = [{"op": "replace", "path": "/spec/ports/0/port", "value": 9001}]
        plane.kubectl(
            "patch", "service", name, "-n", namespace, "--type=json", "-p", json.dumps(edit)
        )

        def restored() -> bool:
            ports = must_get(plane, "service", name, namespace)["spec"]["ports"]
            return [(p["name"], p["port"]) for p in ports] == [("http", 9000)]

        wait_for(restored, "the Service's single http port 9000")
        assert condition(must_get(plane, "trussiumruntime", name, namespace), "Degraded")[1] != (
            "ReconciliationFailed"
        )
