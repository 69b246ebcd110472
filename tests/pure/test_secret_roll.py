"""rollOnSecretChange: the credentials Secrets' versions in the Pod template, and
nothing at all without it."""

import copy
from typing import Any

from trussium_operator.common.api import TrussiumRuntime
from trussium_operator.common.render import secret_versions_annotation
from trussium_operator.controller.runtime.kinds import render_managed_objects

SPEC: dict[str, Any] = {
    "image": {"repository": "ghcr.io/trussium/runtime", "tag": "1.4.2"},
    "provider": {
        "type": "openai",
        "model": "gpt-4o-mini",
        "credentialsSecretRef": {"name": "openai", "key": "api-key"},
    },
    "reranking": {
        "baseURL": "http://tei:8080",
        "credentialsSecretRef": {"name": "tei", "key": "token"},
    },
    "imagePullSecrets": [{"name": "regcred"}],
}
VERSIONS = {"openai": "uid-1/100", "tei": "uid-2/7", "regcred": "uid-3/5", "other": "uid-4/9"}
ANNOTATION = "runtime.trussium.io/secret-versions"


def runtime(**spec: Any) -> TrussiumRuntime:
    return TrussiumRuntime.model_validate(
        {
            "metadata": {"name": "rt", "namespace": "team", "uid": "u"},
            "spec": {**copy.deepcopy(SPEC), **spec},
        }
    )


def template(rt: TrussiumRuntime, versions: dict[str, str]) -> dict[str, Any]:
    (deployment,) = (
        o for o in render_managed_objects(rt, secret_versions=versions) if o["kind"] == "Deployment"
    )
    found: dict[str, Any] = deployment["spec"]["template"]
    return found


def test_off_renders_exactly_what_it_rendered_before() -> None:
    before = render_managed_objects(runtime())
    assert render_managed_objects(runtime(), secret_versions=VERSIONS) == before
    assert render_managed_objects(runtime(rollOnSecretChange=False), secret_versions=VERSIONS) == (
        before
    )


def test_on_names_each_credentials_secret_with_its_identity_and_version() -> None:
    annotations = template(runtime(rollOnSecretChange=True), VERSIONS)["metadata"]["annotations"]
    assert annotations[ANNOTATION] == "openai=uid-1/100,tei=uid-2/7"


def test_only_an_update_of_a_credentials_secret_changes_the_template() -> None:
    on = runtime(rollOnSecretChange=True)
    first = template(on, VERSIONS)
    assert template(on, VERSIONS | {"regcred": "uid-3/6", "other": "uid-4/10"}) == first
    rotated = template(on, VERSIONS | {"openai": "uid-1/101"})
    assert rotated != first
    # The config checksum is the ConfigMap's alone: a Secret update leaves it be.
    checksum = "runtime.trussium.io/config-checksum"
    before, after = first["metadata"]["annotations"], rotated["metadata"]["annotations"]
    assert after[checksum] == before[checksum]


def test_no_annotation_without_known_versions_or_credentials() -> None:
    assert secret_versions_annotation(runtime(rollOnSecretChange=True).spec, {}) == {}
    no_credentials = runtime(
        rollOnSecretChange=True, provider={"type": "ollama", "model": "m"}, reranking=None
    )
    assert secret_versions_annotation(no_credentials.spec, VERSIONS) == {}


def test_the_operators_value_wins_over_a_pod_annotation_of_the_same_key() -> None:
    on = runtime(rollOnSecretChange=True, podMetadata={"annotations": {ANNOTATION: "mine"}})
    assert template(on, VERSIONS)["metadata"]["annotations"][ANNOTATION] == (
        "openai=uid-1/100,tei=uid-2/7"
    )
