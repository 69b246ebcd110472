"""The gate on the Go operator's leader Lease, on kube-apiserver (ADR 0030).

The Go operator is played by its Lease alone (tests/support/go_operator.py), held
where each of its install layouts holds it: its kustomize bundle in
`trussium-operator-system`, its Helm chart in the release namespace. Our controller
finds it with its defaults, reconciles nothing while it is held and fresh, and takes
over once it expires. Without the permission to list it, the controller says so (the
/readyz body, a metric, an error naming the permission) and recovers by itself once
the chart's grant is applied. Everything is observed through the API server, its
audit log and the controller's endpoints and log.
"""

import json
import secrets
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from devcluster import ControlPlane
from devcluster.controller_harness import (
    Controller,
    Obj,
    apply,
    audit_entries,
    get,
    now,
    runtime_manifest,
    sample_sum,
    scoped,
    wait_condition,
    wait_for,
    writes,
)
from devcluster.hostoperator import install_crds
from tests.support.chart import CHART, fullname, release_name
from tests.support.go_operator import GO_LEASE, hold_lease

pytestmark = pytest.mark.api
KUSTOMIZE_NAMESPACE = "trussium-operator-system"
HOLDER = "trussium-operator-controller-manager-7d9f_1f2e"
# Short, so the expiry stays quick; the ratios are the defaults' (15/10/2).
TIMING = ("--lease-duration=6", "--renew-deadline=4", "--retry-period=1")
FORBIDDEN = (
    "cannot read the Go operator's leader Lease: 403 Forbidden: needs verb list on "
    f"leases.coordination.k8s.io (resourceNames {GO_LEASE}) at the cluster scope"
)


@pytest.fixture(autouse=True)
def crd(plane: ControlPlane) -> None:
    install_crds(plane)


def readyz(controller: Controller) -> tuple[int, str]:
    url = f"http://127.0.0.1:{controller.health_port}/readyz"
    try:
        with urllib.request.urlopen(url, timeout=2) as answer:
            return int(answer.status), answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def lease_lists(entries: list[Obj]) -> list[Obj]:
    """The controller's requests for the Go operator's Lease, as the audit log saw them."""
    return [
        e
        for e in entries
        if e.get("verb") == "list" and e.get("objectRef", {}).get("resource") == "leases"
    ]


def log_lines(controller: Controller, message: str) -> list[Obj]:
    """The controller's JSON log lines whose message starts with `message`."""
    lines = controller.log_path.read_text(errors="replace").splitlines()
    entries = [json.loads(line) for line in lines if line.startswith("{")]
    return [e for e in entries if str(e.get("msg", "")).startswith(message)]


@contextmanager
def stopped_after(controller: Controller) -> Iterator[Controller]:
    """Stop the controller when the block ends; print its log if the block failed."""
    try:
        yield controller
    except BaseException:
        print(controller.logs())
        raise
    finally:
        controller.stop()


@contextmanager
def go_operator_leading(plane: ControlPlane, namespace: str) -> Iterator[threading.Event]:
    """The Go operator's leader holding its Lease in `namespace`, renewing every second
    until the yielded event is set; its Lease is deleted afterwards (an api-profile
    namespace is never emptied, and a Lease left held would delay later controllers)."""
    hold_lease(plane, namespace, HOLDER, duration=3)
    stopped = threading.Event()

    def renew() -> None:
        while not stopped.wait(1):
            hold_lease(plane, namespace, HOLDER, duration=3)

    renewer = threading.Thread(target=renew, daemon=True)
    renewer.start()
    try:
        yield stopped
    finally:
        stopped.set()
        renewer.join(5)
        plane.kubectl("delete", "lease", GO_LEASE, "-n", namespace, "--ignore-not-found")


@contextmanager
def go_namespace(plane: ControlPlane, layout: str) -> Iterator[str]:
    """Where the Go operator runs: its kustomize bundle's fixed namespace (kept for later
    tests), or a Helm release namespace of its own."""
    if layout == "kustomize":
        if plane.kubectl("get", "namespace", KUSTOMIZE_NAMESPACE, check=False).returncode:
            plane.create_namespace(KUSTOMIZE_NAMESPACE)
        yield KUSTOMIZE_NAMESPACE
        return
    release_namespace = f"platform-ops-{secrets.token_hex(3)}"
    plane.create_namespace(release_namespace)
    try:
        yield release_namespace
    finally:
        plane.delete_namespace(release_namespace)


@pytest.mark.parametrize("layout", ["kustomize", "helm", "helm-pinned"])
def test_a_fresh_go_operator_lease_holds_us_back_until_it_expires(
    plane: ControlPlane, namespace: str, tmp_path: Path, layout: str
) -> None:
    """Found with the defaults in either layout (or where it is pinned): no write while
    it is held, readiness names it, and the controller takes over once it expires."""
    name = "rt"
    apply(plane, runtime_manifest(name, namespace))
    with (
        go_namespace(plane, layout) as go_ns,
        go_operator_leading(plane, go_ns) as stop_renewing,
    ):
        pinned = [f"--go-operator-lease-namespace={go_ns}"] if layout == "helm-pinned" else []
        lease = f"{go_ns}/{GO_LEASE}"
        since = now()
        launched = Controller(
            plane,
            tmp_path / "controller.log",
            *scoped(namespace),
            *pinned,
            "--no-leader-elect",
            *TIMING,
        )
        with stopped_after(launched) as controller:
            wait_for(
                lambda: controller.metric("trussium_foreign_lease_held", lease=lease) == 1, "held"
            )
            wait_for(lambda: "caches synced" in controller.logs(), "the caches synced")
            # Three more checks of the Lease after the caches synced: unblocked, the
            # workers would have written long before.
            first = len(lease_lists(audit_entries(plane, since)))
            wait_for(
                lambda: len(lease_lists(audit_entries(plane, since))) >= first + 3,
                "three more Lease checks",
            )
            entries = audit_entries(plane, since)
            assert writes(entries) == [], "wrote while the Go operator led"
            assert get(plane, "configmap", name, namespace) is None
            where = f"/namespaces/{go_ns}/leases?" if pinned else "/v1/leases?"
            assert all(where in str(e["requestURI"]) for e in lease_lists(entries))
            assert readyz(controller) == (
                503,
                "waiting for the Go operator's leader Lease to expire or be released: "
                f"{lease} held by {HOLDER}",
            )
            waits = log_lines(controller, "the Go operator holds its leader lease")
            assert [(w["lease"], w["holder"]) for w in waits] == [(lease, HOLDER)]

            stop_renewing.set()  # the Go operator stops: its Lease expires
            wait_condition(
                plane, name, namespace, "ConfigurationValid", "True", "ReferencesResolved"
            )
            assert sample_sum(controller.scrape(), "trussium_foreign_lease_held", lease=lease) == 0
            controller.wait_ready()
            assert controller.process.poll() is None, "proceeded without a restart"


def controller_wiring(plane: ControlPlane, release: str, namespace: str, lease: bool) -> str:
    """The chart's controller ServiceAccount and RBAC, with or without the Lease grant."""
    return plane.helm(
        "template", release, str(CHART), "--namespace", namespace,
        "--show-only", "templates/serviceaccounts.yaml",
        "--show-only", "templates/rbac-controller.yaml",
        "--set", f"controller.goOperatorExclusion.enabled={str(lease).lower()}",
    ).stdout  # fmt: skip


def test_a_forbidden_lease_list_is_reported_and_clears_once_granted(
    plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    """RBAC without the chart's Lease grant: nothing is written, and the controller says
    why, in its readiness, a metric and an error naming the permission, logged once
    and not at every check; the grant applied, it reconciles without a restart."""
    release = release_name()
    account = f"{fullname(release)}-controller"
    without = controller_wiring(plane, release, namespace, lease=False)
    plane.kubectl("apply", "-f", "-", input=without)
    token = plane.kubectl("create", "token", account, "-n", namespace).stdout.strip()
    kubeconfig = plane.token_kubeconfig(token, account)
    name = "rt"
    apply(plane, runtime_manifest(name, namespace))
    since = now()
    launched = Controller(
        plane,
        tmp_path / "controller.log",
        f"--kubeconfig={kubeconfig}",
        *scoped(namespace),
        "--no-leader-elect",
        *TIMING,
    )
    with_lease = controller_wiring(plane, release, namespace, lease=True)
    try:
        with stopped_after(launched) as controller:
            wait_for(lambda: "caches synced" in controller.logs(), "the caches synced")
            wait_for(
                lambda: readyz(controller) == (503, FORBIDDEN), "readiness names the permission"
            )
            assert controller.metric("trussium_foreign_lease_unreadable") == 1

            def refused() -> int:
                lists = lease_lists(audit_entries(plane, since))
                assert all(e["responseStatus"]["code"] == 403 for e in lists)
                return len(lists)

            first = refused()
            wait_for(lambda: refused() >= first + 3, "three more refused Lease lists")
            assert writes(audit_entries(plane, since)) == [], "wrote without knowing"
            assert get(plane, "configmap", name, namespace) is None
            errors = log_lines(controller, "cannot read the Go operator's leader lease")
            assert len(errors) == 1, "logged at once, then with backoff (next after 30 s)"
            assert errors[0]["level"] == "error"
            assert errors[0]["msg"].endswith("reconciling nothing until it can be read")
            assert {k: errors[0][k] for k in ("verb", "resource", "resourceName", "namespace")} == {
                "verb": "list",
                "resource": "leases.coordination.k8s.io",
                "resourceName": GO_LEASE,
                "namespace": "*",
            }
            assert errors[0]["error"] == FORBIDDEN.split("Lease: ", 1)[1]

            plane.kubectl("apply", "-f", "-", input=with_lease)  # the chart's grant
            wait_condition(
                plane, name, namespace, "ConfigurationValid", "True", "ReferencesResolved"
            )
            controller.wait_ready()
            assert sample_sum(controller.scrape(), "trussium_foreign_lease_unreadable") == 0
            assert log_lines(controller, "the Go operator's leader lease can be read again")
            assert controller.process.poll() is None, "recovered without a restart"
    finally:
        plane.kubectl("delete", "--ignore-not-found", "-f", "-", input=with_lease)
