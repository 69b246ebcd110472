"""Liveness, readiness, Prometheus metrics, one log line per admission."""

import json
import logging
from collections.abc import Awaitable, Callable

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from trussium_operator.cmdline.logs import JsonFormatter
from trussium_operator.serving.health import metrics_app
from trussium_operator.webhook.app import create_health_app
from trussium_operator.webhook.metrics import WebhookMetrics

from .conftest import Client
from .reviews import review as make_review
from .reviews import runtime, sample

HealthClient = TestClient[web.Request, web.Application]


async def test_readyz_follows_the_tls_material(
    aiohttp_client: Callable[[web.Application], Awaitable[HealthClient]],
) -> None:
    loaded = False
    health = await aiohttp_client(create_health_app(lambda: loaded))
    assert (await health.get("/healthz")).status == 200
    not_ready = await health.get("/readyz")
    assert not_ready.status == 503
    assert "certificate" in await not_ready.text()
    loaded = True
    assert (await health.get("/readyz")).status == 200


async def test_metrics_under_controller_runtime_names_plus_verdicts_and_process(
    client: Client,
    aiohttp_client: Callable[[web.Application], Awaitable[HealthClient]],
    metrics: WebhookMetrics,
) -> None:
    await client.post("/validate-trussiumruntime", json=make_review(runtime()))
    await client.post(
        "/validate-trussiumruntime", json=make_review(sample("invalid/autoscaling.yaml"))
    )
    await client.post("/mutate-trussiumruntime", data=b"garbage")
    await client.post("/not-a-hook", data=b"{}")
    metrics.certificate_expiry.set(1_900_000_000)
    scrape = await aiohttp_client(metrics_app(metrics.registry))
    exposition = await (await scrape.get("/metrics")).text()
    validate = 'webhook="/validate-trussiumruntime"'
    for line in (
        f'controller_runtime_webhook_requests_total{{code="200",{validate}}} 2.0',
        'controller_runtime_webhook_requests_total{code="400",'
        'webhook="/mutate-trussiumruntime"} 1.0',
        f"controller_runtime_webhook_latency_seconds_count{{{validate}}} 2.0",
        f"controller_runtime_webhook_requests_in_flight{{{validate}}} 0.0",
        'trussium_webhook_requests_total{hook="validate-trussiumruntime",verdict="allowed"} 1.0',
        'trussium_webhook_requests_total{hook="validate-trussiumruntime",verdict="denied"} 1.0',
        'trussium_webhook_requests_total{hook="mutate-trussiumruntime",verdict="error"} 1.0',
        "trussium_webhook_certificate_expiry_timestamp_seconds 1.9e+09",
    ):
        assert line in exposition
    assert "not-a-hook" not in exposition
    for family in ("process_resident_memory_bytes", "python_info", "python_gc_objects_collected"):
        assert f"\n{family}" in exposition, family


async def test_one_json_log_line_per_admission_without_contents(
    client: Client, caplog: pytest.LogCaptureFixture
) -> None:
    obj = runtime(podMetadata={"annotations": {"note": "do-not-log-me"}})
    with caplog.at_level(logging.INFO, logger="trussium_operator.webhook.app"):
        await client.post("/validate-trussiumruntime", json=make_review(obj, dry_run=True))
    records = [r for r in caplog.records if r.getMessage() == "admission reviewed"]
    assert len(records) == 1
    line = JsonFormatter().format(records[0])
    assert "do-not-log-me" not in line
    entry = json.loads(line)
    assert entry["hook"] == "validate-trussiumruntime"
    assert entry["uid"] == "7d6c-uid"
    assert entry["object"] == "team-a/chat"
    assert entry["verdict"] == "allowed"
    assert entry["dry_run"] is True
    assert entry["duration_ms"] >= 0
