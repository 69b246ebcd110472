"""Both programs, running against the local control plane with the chart's wiring,
expose their metrics under the names and labels dashboards and alerts expect."""

import secrets
from collections import defaultdict
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from devcluster import ControlPlane
from devcluster.hostoperator import HostOperator, install_crds
from devcluster.polling import wait_for

RUNTIME = (Path(__file__).resolve().parents[1] / "samples" / "valid" / "minimal.yaml").read_text()
Samples = dict[str, list[dict[str, str]]]

# name -> the label names every sample of it carries
RUNTIME_LABELS = ("runtime_namespace", "runtime_name")
QUEUE = {"name", "controller"}
CONTROLLER_METRICS = {
    "controller_runtime_reconcile_total": {"controller", "result"},
    "controller_runtime_reconcile_errors_total": {"controller"},
    "controller_runtime_terminal_reconcile_errors_total": {"controller"},
    "controller_runtime_reconcile_panics_total": {"controller"},
    "controller_runtime_reconcile_time_seconds_bucket": {"controller", "le"},
    "controller_runtime_active_workers": {"controller"},
    "controller_runtime_max_concurrent_reconciles": {"controller"},
    "workqueue_depth": QUEUE | {"priority"},
    "workqueue_adds_total": QUEUE,
    "workqueue_retries_total": QUEUE,
    "workqueue_queue_duration_seconds_bucket": QUEUE | {"le"},
    "workqueue_work_duration_seconds_bucket": QUEUE | {"le"},
    "workqueue_unfinished_work_seconds": QUEUE,
    "workqueue_longest_running_processor_seconds": QUEUE,
    "rest_client_requests_total": {"code", "method", "host"},
    "leader_election_master_status": {"name"},
    "leader_election_slowpath_total": {"name"},
    "trussium_runtimes": {"ready"},
    "trussium_runtime_ready": set(RUNTIME_LABELS),
    "trussium_runtime_ready_replicas": set(RUNTIME_LABELS),
    "trussium_runtime_available_replicas": set(RUNTIME_LABELS),
    "trussium_runtime_upgrade_state": {*RUNTIME_LABELS, "state"},
    "trussium_runtime_info": {*RUNTIME_LABELS, "desired_image", "current_image"},
}
WEBHOOK_METRICS = {
    "controller_runtime_webhook_requests_total": {"webhook", "code"},
    "controller_runtime_webhook_latency_seconds_bucket": {"webhook", "le"},
    "controller_runtime_webhook_requests_in_flight": {"webhook"},
    "trussium_webhook_requests_total": {"hook", "verdict"},
    "trussium_webhook_certificate_expiry_timestamp_seconds": set(),
}
PROCESS_METRICS = ("process_cpu_seconds_total", "process_resident_memory_bytes", "python_info")


def samples_of(text: str) -> Samples:
    samples: Samples = defaultdict(list)
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[sample.name].append(sample.labels)
    return samples


def value(text: str, name: str, /, **labels: str) -> float:
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name and labels.items() <= sample.labels.items()
    )


def assert_exposed(samples: Samples, expected: dict[str, set[str]]) -> None:
    assert not [name for name in samples if name.endswith("_created")], "not in Go's exposition"
    for name, labels in [*expected.items(), *((n, set()) for n in PROCESS_METRICS)]:
        assert samples.get(name), f"{name} is not exposed"
        for sample_labels in samples[name]:
            assert labels <= set(sample_labels), (name, sample_labels)


@pytest.mark.api
def test_controller_and_webhook_metrics_on_a_running_operator(
    plane: ControlPlane, namespace: str
) -> None:
    install_crds(plane)
    release = f"trussium-operator-{secrets.token_hex(3)}"  # the chart names objects after it
    operator = HostOperator(plane, namespace=release, release=release, watch_namespace=namespace)
    try:
        with operator:
            plane.kubectl("apply", "-n", namespace, "-f", "-", input=RUNTIME)
            port = operator.controller_metrics_port
            wait_for(
                lambda: value(operator.scrape(port), "controller_runtime_reconcile_total") > 0,
                "a reconcile",
                60,
            )

            # Someone else writes the Lease: the leader's next renewal, sent with the
            # version it wrote last, conflicts; the one after reads the Lease first.
            lease = ("lease", release, "-n", release)
            plane.kubectl("annotate", *lease, f"touched={secrets.token_hex(2)}")
            wait_for(
                lambda: (
                    value(operator.scrape(port), "leader_election_slowpath_total", name=release)
                    >= 1
                ),
                "a slow-path renewal",
                30,
            )
            controller_text = operator.scrape(port)
            assert value(controller_text, "leader_election_master_status", name=release) == 1

            controller = samples_of(controller_text)
            webhook = samples_of(operator.scrape(operator.webhook_metrics_port))
    finally:
        plane.kubectl("delete", "--ignore-not-found", "-f", "-", input=operator.render_wiring())

    assert_exposed(controller, CONTROLLER_METRICS)
    assert {"controller": "trussiumruntime"} in controller["controller_runtime_active_workers"]
    assert {"name": "trussiumruntime", "controller": "trussiumruntime"} in controller[
        "workqueue_unfinished_work_seconds"
    ]
    api_server = plane.server.removeprefix("https://")
    assert {"code": "200", "method": "GET", "host": api_server} in controller[
        "rest_client_requests_total"
    ]
    assert {"name": release} in controller["leader_election_master_status"]
    queue = {"name": "trussiumruntime", "controller": "trussiumruntime"}
    assert queue | {"priority": ""} in controller["workqueue_depth"]
    assert queue in controller["workqueue_adds_total"]
    runtime = {"runtime_namespace": namespace, "runtime_name": "minimal"}
    assert runtime in controller["trussium_runtime_ready"]
    states = {
        s["state"]
        for s in controller["trussium_runtime_upgrade_state"]
        if runtime.items() <= s.items()
    }
    assert states == {"NoUpgrade", "UpgradeInProgress", "UpgradeComplete", "UpgradeFailed"}
    (info,) = [s for s in controller["trussium_runtime_info"] if runtime.items() <= s.items()]
    assert info["desired_image"].startswith("ghcr.io/")

    assert_exposed(webhook, WEBHOOK_METRICS)
    for path in ("/mutate-trussiumruntime", "/validate-trussiumruntime"):
        assert {"webhook": path, "code": "200"} in webhook[
            "controller_runtime_webhook_requests_total"
        ]
