"""The offline check as a pure function: what counts as a near miss, and what render needs."""

import pytest

from trussium_operator.offline.checks import check_documents

RUNTIME = {
    "apiVersion": "runtime.trussium.io/v1alpha1",
    "kind": "TrussiumRuntime",
    "metadata": {"name": "chat", "namespace": "team-a"},
    "spec": {
        "image": {"repository": "ghcr.io/trussiumhq/trussium", "tag": "1.4.2"},
        "provider": {"type": "ollama", "model": "llama3.2", "baseURL": "http://ollama:11434/v1"},
    },
}


@pytest.mark.parametrize(
    ("api_version", "kind"),
    [
        ("apps/v1", "Deployment"),
        ("v1", "Service"),
        ("autoscaling/v2", "HorizontalPodAutoscaler"),
        ("v1", "List"),
        ("example.com/v1", "TrussiumModel"),
        ("example.com/v1", "Runtime"),
    ],
)
def test_other_kinds_are_skipped_without_a_finding(api_version: str, kind: str) -> None:
    report = check_documents([("f", {"apiVersion": api_version, "kind": kind})])
    assert (report.runtimes, report.findings) == ([], [])


def test_a_valid_runtime_yields_its_model_and_defaults() -> None:
    (checked,) = check_documents([("f", RUNTIME)]).runtimes
    assert checked.model is not None
    assert (checked.model.metadata.namespace, checked.model.metadata.name) == ("team-a", "chat")
    assert checked.defaulted is not None
    assert checked.defaulted["spec"]["replicas"] == 1


def test_generate_name_is_enough_only_when_allowed() -> None:
    generated = RUNTIME | {"metadata": {"generateName": "chat-"}}
    accepted = check_documents([("f", generated)])
    assert accepted.findings == []
    assert accepted.runtimes[0].model is None, "no name, nothing to render"
    (finding,) = check_documents([("f", generated)], generate_name=False).findings
    assert (finding.field, finding.message) == ("metadata.name", "Required value")


def test_metadata_the_model_cannot_take_is_an_error_with_a_field() -> None:
    odd = RUNTIME | {"metadata": {"name": "chat", "generation": "first"}}
    report = check_documents([("f", odd)])
    assert [(f.severity, f.field) for f in report.findings] == [("error", "metadata")]
    assert report.runtimes[0].model is None
