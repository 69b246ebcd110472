"""The per-runtime series: a fixed set per runtime, read from its status alone."""

from typing import Any

from trussium_operator.controller.metrics import SERIES_PER_RUNTIME, runtime_samples

IMAGE = "ghcr.io/trussiumhq/trussium@sha256:" + "a" * 64


def _values(status: dict[str, Any] | None) -> dict[tuple[str, tuple[str, ...]], float]:
    samples = runtime_samples("team-a", "chat", status)
    assert len(samples) == SERIES_PER_RUNTIME
    return {(s.family.name, s.labels): s.value for s in samples}


def _condition(type_: str, status: str, reason: str) -> dict[str, str]:
    return {"type": type_, "status": status, "reason": reason, "message": "m"}


def test_a_ready_runtime_mid_upgrade() -> None:
    values = _values(
        {
            "readyReplicas": 3,
            "availableReplicas": 2,
            "desiredImage": IMAGE,
            "currentImage": "ghcr.io/trussiumhq/trussium:0.9.0",
            "conditions": [
                _condition("Ready", "True", "RuntimeReady"),
                _condition("Upgrading", "True", "UpgradeInProgress"),
            ],
        }
    )
    runtime = ("team-a", "chat")
    assert values[("trussium_runtime_ready", runtime)] == 1
    assert values[("trussium_runtime_ready_replicas", runtime)] == 3
    assert values[("trussium_runtime_available_replicas", runtime)] == 2
    states = {
        labels[2]: value
        for (name, labels), value in values.items()
        if name == "trussium_runtime_upgrade_state"
    }
    assert states == {
        "NoUpgrade": 0,
        "UpgradeInProgress": 1,
        "UpgradeComplete": 0,
        "UpgradeFailed": 0,
    }
    info = (*runtime, IMAGE, "ghcr.io/trussiumhq/trussium:0.9.0")
    assert values[("trussium_runtime_info", info)] == 1


def test_no_status_yet_is_not_ready_with_every_series_present() -> None:
    values = _values(None)
    assert values[("trussium_runtime_ready", ("team-a", "chat"))] == 0
    assert values[("trussium_runtime_info", ("team-a", "chat", "", ""))] == 1
    assert sum(v for (n, _), v in values.items() if n == "trussium_runtime_upgrade_state") == 0


def test_a_failed_upgrade_and_junk_in_the_status() -> None:
    values = _values(
        {
            "readyReplicas": "3",
            "availableReplicas": True,
            "desiredImage": ["x"],
            "conditions": [
                _condition("Ready", "Unknown", "RuntimeNotReady"),
                _condition("Upgrading", "False", "UpgradeFailed"),
                "junk",
            ],
        }
    )
    runtime = ("team-a", "chat")
    assert values[("trussium_runtime_ready", runtime)] == 0
    assert values[("trussium_runtime_ready_replicas", runtime)] == 0
    assert values[("trussium_runtime_available_replicas", runtime)] == 0
    assert values[("trussium_runtime_upgrade_state", (*runtime, "UpgradeFailed"))] == 1
    assert values[("trussium_runtime_info", (*runtime, "", ""))] == 1
