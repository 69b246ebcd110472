"""Building AdmissionReview requests and reading answers, for the handler tests."""

import base64
import copy
import json
from pathlib import Path
from typing import Any

import yaml

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
OPERATOR = "system:serviceaccount:trussium-system:trussium-operator"
RUNTIME_KIND = {"group": "runtime.trussium.io", "version": "v1alpha1", "kind": "TrussiumRuntime"}
DEPLOYMENT_KIND = {"group": "apps", "version": "v1", "kind": "Deployment"}


def review(
    obj: dict[str, Any] | None,
    *,
    old: dict[str, Any] | None = None,
    operation: str = "CREATE",
    kind: dict[str, str] = RUNTIME_KIND,
    username: str = "alice",
    dry_run: bool = False,
    uid: str = "7d6c-uid",
) -> dict[str, Any]:
    metadata = (obj or old or {}).get("metadata", {})
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": kind,
            "resource": {"group": kind["group"], "version": kind["version"], "resource": "x"},
            "operation": operation,
            "namespace": metadata.get("namespace", "team-a"),
            "name": metadata.get("name", ""),
            "userInfo": {"username": username, "groups": ["system:authenticated"]},
            "object": obj,
            "oldObject": old,
            "dryRun": dry_run,
        },
    }


def runtime(**spec: Any) -> dict[str, Any]:
    """A valid TrussiumRuntime (explicit tag, no defaults applied) with `spec` merged in."""
    base: dict[str, Any] = {
        "apiVersion": "runtime.trussium.io/v1alpha1",
        "kind": "TrussiumRuntime",
        "metadata": {"name": "chat", "namespace": "team-a"},
        "spec": {
            "image": {"repository": "ghcr.io/trussiumhq/trussium", "tag": "1.4.2"},
            "provider": {"type": "openai", "model": "gpt-4o-mini"},
        },
    }
    base["spec"].update(copy.deepcopy(spec))
    return base


def sample(path: str) -> dict[str, Any]:
    """The TrussiumRuntime document of a sample file."""
    documents = list(yaml.safe_load_all((SAMPLES / path).read_text()))
    found: dict[str, Any] = next(d for d in documents if d.get("kind") == "TrussiumRuntime")
    found["metadata"]["namespace"] = "team-a"
    return found


def response(answer: dict[str, Any], uid: str = "7d6c-uid") -> dict[str, Any]:
    """The response of a well-formed AdmissionReview answer for `uid`."""
    assert answer["apiVersion"] == "admission.k8s.io/v1"
    assert answer["kind"] == "AdmissionReview"
    result: dict[str, Any] = answer["response"]
    assert result["uid"] == uid
    assert isinstance(result["allowed"], bool)
    return result


def patch_of(result: dict[str, Any]) -> list[dict[str, Any]]:
    if "patch" not in result:
        return []
    assert result["patchType"] == "JSONPatch"
    patch: list[dict[str, Any]] = json.loads(base64.b64decode(result["patch"]))
    return patch


def causes(result: dict[str, Any]) -> dict[str, str]:
    """field -> message of a 422 Invalid denial."""
    status = result["status"]
    assert (status["code"], status["reason"]) == (422, "Invalid")
    return {cause["field"]: cause["message"] for cause in status["details"]["causes"]}
