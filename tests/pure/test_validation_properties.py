"""Properties of validation over generated objects (hypothesis)."""

import copy
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.strategies import json_values, runtimes
from trussium_operator.common.defaulting import apply_defaults
from trussium_operator.common.parsing import schema_errors
from trussium_operator.common.validation import validate_runtime, with_missing_secrets

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Places worth corrupting: every field of the spec, and the Kubernetes types inside it.
PATHS = [
    ("image",),
    ("image", "repository"),
    ("image", "tag"),
    ("replicas",),
    ("imagePullSecrets",),
    ("provider",),
    ("provider", "baseURL"),
    ("provider", "credentialsSecretRef"),
    ("runtime",),
    ("service",),
    ("networkPolicy",),
    ("networkPolicy", "ingress"),
    ("autoscaling",),
    ("resources",),
    ("resources", "limits"),
    ("resources", "requests"),
    ("podMetadata",),
    ("podMetadata", "labels"),
    ("podMetadata", "annotations"),
    ("scheduling",),
    ("scheduling", "nodeSelector"),
    ("scheduling", "tolerations"),
    ("scheduling", "affinity"),
    ("scheduling", "affinity", "nodeAffinity"),
    ("scheduling", "affinity", "podAntiAffinity"),
]


@st.composite
def corrupted_runtimes(draw: st.DrawFn) -> dict[str, Any]:
    obj = draw(runtimes())
    for _ in range(draw(st.integers(1, 3))):
        *parents, last = draw(st.sampled_from(PATHS))
        target = obj["spec"]
        for key in parents:
            if not isinstance(target.get(key), dict):
                target[key] = {}
            target = target[key]
        target[last] = draw(json_values())
    return obj


@SETTINGS
@given(st.one_of(json_values(), st.dictionaries(st.just("spec"), json_values())))
def test_validate_never_raises_on_arbitrary_json(obj: Any) -> None:
    result = with_missing_secrets(validate_runtime(obj, obj), frozenset())
    assert isinstance(result.errors, tuple)


@SETTINGS
@given(corrupted_runtimes(), corrupted_runtimes())
def test_validate_never_raises_on_corrupted_runtimes(obj: Any, old: Any) -> None:
    with_missing_secrets(validate_runtime(obj, old), frozenset({"a"}))
    result = validate_runtime(obj)
    # Every error has a Kubernetes-style path (under spec, or the name) and a message.
    assert all(e.path.startswith(("spec", "metadata.name")) and e.message for e in result.errors)
    assert set(schema_errors(obj)) <= set(result.errors)


@SETTINGS
@given(runtimes())
def test_generated_runtimes_are_valid(obj: dict[str, Any]) -> None:
    assert validate_runtime(obj).errors == ()


@SETTINGS
@given(st.one_of(runtimes(), corrupted_runtimes()))
def test_defaulting_never_changes_the_verdict(obj: dict[str, Any]) -> None:
    before = validate_runtime(obj)
    after = validate_runtime(apply_defaults(obj).object)
    assert before.allowed == after.allowed
    assert before.errors == after.errors


@SETTINGS
@given(corrupted_runtimes())
def test_an_unchanged_object_never_fails_an_update(obj: dict[str, Any]) -> None:
    assert validate_runtime(obj, copy.deepcopy(obj)).allowed
