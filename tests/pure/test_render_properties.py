"""Properties of rendering that must hold for every valid runtime."""

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from trussium_operator.common.api import TrussiumRuntime
from trussium_operator.common.constants import CONFIG_CHECKSUM_ANNOTATION, OPERATOR_LABEL_KEYS
from trussium_operator.common.render import config_checksum
from trussium_operator.controller.runtime.kinds import render_managed_objects

NAMES = st.from_regex(r"[a-z]([a-z0-9-]{0,20}[a-z0-9])?", fullmatch=True)
VALUES = st.text(alphabet="abcXYZ019-_.", max_size=12)
KEYS = st.sampled_from(OPERATOR_LABEL_KEYS) | st.from_regex(
    r"[a-z]{1,8}(/[a-z]{1,8})?", fullmatch=True
)
TIMEOUTS = st.none() | st.integers(1, 3600)


@st.composite
def runtimes(draw: st.DrawFn) -> TrussiumRuntime:
    image: dict[str, Any] = {"repository": "ghcr.io/trussium/runtime"}
    if draw(st.booleans()):
        image["tag"] = draw(st.from_regex(r"[a-z0-9][a-z0-9.]{0,10}", fullmatch=True))
    else:
        image["digest"] = "sha256:" + draw(st.binary(min_size=32, max_size=32)).hex()
    tuning = {
        key: value
        for key, value in {
            "providerRequestTimeoutSeconds": draw(TIMEOUTS),
            "streamIdleTimeoutSeconds": draw(TIMEOUTS),
            "shutdownDrainTimeoutSeconds": draw(TIMEOUTS),
        }.items()
        if value is not None
    }
    annotation_keys = KEYS | st.just(CONFIG_CHECKSUM_ANNOTATION)
    spec = {
        "image": image,
        "replicas": draw(st.integers(0, 1000)),
        "provider": {"type": draw(st.sampled_from(["openai", "ollama"])), "model": "m"},
        "runtime": tuning,
        "podMetadata": {
            "labels": draw(st.dictionaries(KEYS, VALUES, max_size=6)),
            "annotations": draw(st.dictionaries(annotation_keys, VALUES, max_size=6)),
        },
        "autoscaling": {"enabled": draw(st.booleans())},
    }
    metadata = {"name": draw(NAMES), "namespace": draw(NAMES), "uid": draw(st.uuids()).hex}
    return TrussiumRuntime.model_validate({"metadata": metadata, "spec": spec})


@given(runtimes())
def test_rendering_is_deterministic(rt: TrussiumRuntime) -> None:
    again = TrussiumRuntime.model_validate(rt.model_dump(by_alias=True))
    assert render_managed_objects(rt) == render_managed_objects(again)


@given(runtimes())
def test_user_metadata_never_overrides_the_operator_s(rt: TrussiumRuntime) -> None:
    rendered = render_managed_objects(rt)
    checksum = config_checksum(rendered[0]["data"])
    for obj in rendered:
        labels = obj["metadata"]["labels"]
        assert labels[OPERATOR_LABEL_KEYS[1]] == rt.metadata.name
        if obj["kind"] == "Deployment":
            template = obj["spec"]["template"]["metadata"]
            assert {k: template["labels"][k] for k in OPERATOR_LABEL_KEYS} == labels
            user = (rt.spec.pod_metadata and rt.spec.pod_metadata.labels) or {}
            for key, value in user.items():
                if key not in OPERATOR_LABEL_KEYS:
                    assert template["labels"][key] == value
            assert template["annotations"][CONFIG_CHECKSUM_ANNOTATION] == checksum
