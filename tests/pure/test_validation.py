"""Validation: every rule of docs/contract.md sections 2 and 10, all violations at once."""

import copy
from typing import Any

import pytest

from trussium_operator.common.parsing import schema_errors
from trussium_operator.common.validation import (
    FieldError,
    ValidationResult,
    validate_runtime,
    with_missing_secrets,
)

VALID: dict[str, Any] = {
    "apiVersion": "runtime.trussium.io/v1alpha1",
    "kind": "TrussiumRuntime",
    "metadata": {"name": "rt", "namespace": "team"},
    "spec": {
        "image": {"repository": "ghcr.io/trussium/runtime", "tag": "1.4.2"},
        "provider": {
            "type": "openai",
            "model": "gpt-4o-mini",
            "baseURL": "https://api.example.com/v1",
            "credentialsSecretRef": {"name": "openai", "key": "api-key"},
        },
        "imagePullSecrets": [{"name": "regcred"}],
        "resources": {"requests": {"cpu": "250m", "memory": "256Mi"}, "limits": {"memory": "1Gi"}},
        "podMetadata": {"labels": {"team": "ml"}, "annotations": {"example.com/owner": "ml"}},
        "scheduling": {
            "nodeSelector": {"kubernetes.io/os": "linux"},
            "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
        },
    },
}


def with_spec(**changes: Any) -> dict[str, Any]:
    """VALID with top-level spec fields replaced (None deletes)."""
    obj = copy.deepcopy(VALID)
    for key, value in changes.items():
        if value is None:
            obj["spec"].pop(key, None)
        else:
            obj["spec"][key] = value
    return obj


def errors_of(obj: object, **kwargs: Any) -> dict[str, str]:
    result = validate_runtime(obj, **kwargs)
    return {e.path: e.message for e in result.errors}


def test_valid_runtime_is_allowed_without_warnings() -> None:
    result = with_missing_secrets(validate_runtime(VALID), frozenset({"openai", "regcred"}))
    assert result == ValidationResult(errors=(), field_warnings=())
    assert result.allowed


# --- section 2: schema rules


@pytest.mark.parametrize(
    ("image", "path", "fragment"),
    [
        ({"repository": "r"}, "spec.image", "exactly one of tag or digest must be specified"),
        (
            {"repository": "r", "tag": "1", "digest": "sha256:" + "a" * 64},
            "spec.image",
            "exactly one of tag or digest must be specified",
        ),
        ({"repository": "", "tag": "1"}, "spec.image.repository", "must not be empty"),
        ({"repository": "r" * 256, "tag": "1"}, "spec.image.repository", "at most 255"),
        ({"repository": "-r", "tag": "1"}, "spec.image.repository", "starting with a letter"),
        ({"repository": "r", "tag": ".1"}, "spec.image.tag", "not starting with '.'"),
        ({"repository": "r", "digest": "sha256:abc"}, "spec.image.digest", "64 lowercase"),
        (
            {"repository": "r", "tag": "1", "pullPolicy": "Sometimes"},
            "spec.image.pullPolicy",
            "supported values",
        ),
        ({"tag": "1"}, "spec.image.repository", "Required value"),
    ],
)
def test_image_rules(image: dict[str, Any], path: str, fragment: str) -> None:
    assert fragment in errors_of(with_spec(image=image))[path]


@pytest.mark.parametrize(
    ("field", "value", "path", "fragment"),
    [
        ("replicas", -1, "spec.replicas", "greater than or equal to 0"),
        ("replicas", 1001, "spec.replicas", "less than or equal to 1000"),
        ("replicas", "3", "spec.replicas", "must be an integer"),
        ("replicas", True, "spec.replicas", "must be an integer"),
        (
            "imagePullSecrets",
            [{"name": "Bad_Name"}],
            "spec.imagePullSecrets[0].name",
            "RFC 1123 subdomain",
        ),
        (
            "imagePullSecrets",
            [{"name": f"s{i}"} for i in range(21)],
            "spec.imagePullSecrets",
            "at most 20 items",
        ),
        (
            "imagePullSecrets",
            [{"name": "a"}, {"name": "a"}],
            "spec.imagePullSecrets",
            "duplicate name 'a'",
        ),
        ("service", {"type": "ExternalName"}, "spec.service.type", "supported values"),
        ("service", {"port": 0}, "spec.service.port", "greater than or equal to 1"),
        ("service", {"port": 65536}, "spec.service.port", "less than or equal to 65535"),
        (
            "runtime",
            {"streamIdleTimeoutSeconds": 3601},
            "spec.runtime.streamIdleTimeoutSeconds",
            "less than or equal to 3600",
        ),
        (
            "networkPolicy",
            {"enabled": True},
            "spec.networkPolicy",
            "at least one ingress rule is required when networkPolicy.enabled is true",
        ),
        (
            "networkPolicy",
            {"enabled": True, "ingress": []},
            "spec.networkPolicy",
            "at least one ingress rule is required when networkPolicy.enabled is true",
        ),
        ("networkPolicy", {"enabled": "yes"}, "spec.networkPolicy.enabled", "must be a boolean"),
        (
            "autoscaling",
            {"minReplicas": 5, "maxReplicas": 4},
            "spec.autoscaling",
            "maxReplicas must be greater than or equal to minReplicas",
        ),
        (
            "autoscaling",
            {"minReplicas": 11},
            "spec.autoscaling",
            "maxReplicas must be greater than or equal to minReplicas",
        ),
        (
            "autoscaling",
            {"targetCPUUtilizationPercentage": 101},
            "spec.autoscaling.targetCPUUtilizationPercentage",
            "less than or equal to 100",
        ),
        ("podSpec", {"containers": []}, "spec.podSpec", "unknown field 'podSpec'"),
        ("podMetadata", {"labels": {"a": 1}}, "spec.podMetadata.labels[a]", "must be a string"),
        ("resources", {"limits": {"cpu": 1.5}}, "spec.resources.limits[cpu]", "must be a quantity"),
        (
            "resources",
            {"limits": {"cpu": "one"}},
            "spec.resources.limits[cpu]",
            "'one' is not a quantity",
        ),
    ],
)
def test_spec_schema_rules(field: str, value: Any, path: str, fragment: str) -> None:
    errors = errors_of(with_spec(**{field: value}))
    assert fragment in errors[path]
    assert path in {e.path for e in schema_errors(with_spec(**{field: value}))}


@pytest.mark.parametrize(
    ("provider", "path", "fragment"),
    [
        ({"model": "m"}, "spec.provider.type", "Required value"),
        ({"type": "anthropic", "model": "m"}, "spec.provider.type", "'openai' or 'ollama'"),
        ({"type": "openai"}, "spec.provider.model", "Required value"),
        ({"type": "openai", "model": "m" * 256}, "spec.provider.model", "at most 255"),
        (
            {"type": "openai", "model": "m", "baseURL": "ftp://host"},
            "spec.provider.baseURL",
            "absolute http or https URL",
        ),
        (
            {"type": "openai", "model": "m", "baseURL": "/v1"},
            "spec.provider.baseURL",
            "absolute http or https URL",
        ),
        (
            {"type": "openai", "model": "m", "baseURL": "http://"},
            "spec.provider.baseURL",
            "with a host",
        ),
        (
            {"type": "openai", "model": "m", "baseURL": "http://h:port"},
            "spec.provider.baseURL",
            "absolute http or https URL",
        ),
        (
            {"type": "openai", "model": "m", "baseURL": "https://" + "h" * 2048},
            "spec.provider.baseURL",
            "at most 2048",
        ),
        (
            {"type": "openai", "model": "m", "credentialsSecretRef": {"name": "s", "key": "a b"}},
            "spec.provider.credentialsSecretRef.key",
            "letters, digits",
        ),
        (
            {"type": "openai", "model": "m", "credentialsSecretRef": {"key": "k"}},
            "spec.provider.credentialsSecretRef.name",
            "Required value",
        ),
    ],
)
def test_provider_rules(provider: dict[str, Any], path: str, fragment: str) -> None:
    assert fragment in errors_of(with_spec(provider=provider))[path]


def test_missing_or_malformed_spec() -> None:
    assert errors_of({"metadata": {"name": "x"}}) == {"spec": "Required value"}
    assert errors_of({"spec": []}) == {"spec": "must be an object"}
    assert errors_of(["not", "an", "object"]) == {"": "a TrussiumRuntime must be a JSON object"}


def test_all_violations_are_reported_together() -> None:
    obj = with_spec(
        image={"repository": "r", "tag": "1", "digest": "sha256:" + "a" * 64},
        replicas=5000,
        podSpec={},
        podMetadata={"labels": {"app.kubernetes.io/name": "x"}},
        scheduling={"tolerations": [{"operator": "Equal"}]},
    )
    assert set(errors_of(obj)) == {
        "spec.image",
        "spec.replicas",
        "spec.podSpec",
        "spec.podMetadata.labels[app.kubernetes.io/name]",
        "spec.scheduling.tolerations[0].operator",
    }


# --- section 10: what the schema cannot express


@pytest.mark.parametrize(
    "key",
    [
        "app.kubernetes.io/name",
        "app.kubernetes.io/instance",
        "app.kubernetes.io/component",
        "app.kubernetes.io/managed-by",
    ],
)
def test_operator_owned_labels_are_rejected(key: str) -> None:
    errors = errors_of(with_spec(podMetadata={"labels": {key: "mine"}}))
    assert "set by the operator" in errors[f"spec.podMetadata.labels[{key}]"]


@pytest.mark.parametrize(
    ("key", "fragment"),
    [
        ("runtime.trussium.io/config-checksum", "reserved for the operator"),
        ("runtime.trussium.io/anything", "reserved for the operator"),
        (
            "container.apparmor.security.beta.kubernetes.io/trussium",
            "unsupported Pod customization",
        ),
        ("seccomp.security.alpha.kubernetes.io/pod", "unsupported Pod customization"),
        (
            "container.seccomp.security.alpha.kubernetes.io/trussium",
            "unsupported Pod customization",
        ),
    ],
)
def test_reserved_annotations_are_rejected(key: str, fragment: str) -> None:
    errors = errors_of(with_spec(podMetadata={"annotations": {key: "x"}}))
    assert fragment in errors[f"spec.podMetadata.annotations[{key}]"]


@pytest.mark.parametrize(
    ("labels", "path", "fragment"),
    [
        ({"bad key": "v"}, "spec.podMetadata.labels[bad key]", "name part must consist"),
        ({"-x": "v"}, "spec.podMetadata.labels[-x]", "name part must consist"),
        ({"x" * 64: "v"}, f"spec.podMetadata.labels[{'x' * 64}]", "no more than 63"),
        ({"Example.com/x": "v"}, "spec.podMetadata.labels[Example.com/x]", "prefix part"),
        ({"/x": "v"}, "spec.podMetadata.labels[/x]", "prefix part must be non-empty"),
        ({"a/b/c": "v"}, "spec.podMetadata.labels[a/b/c]", "optional DNS subdomain prefix"),
        ({"k": "v" * 64}, "spec.podMetadata.labels[k]", "no more than 63"),
        ({"k": "bad value"}, "spec.podMetadata.labels[k]", "label value"),
    ],
)
def test_label_syntax(labels: dict[str, str], path: str, fragment: str) -> None:
    assert fragment in errors_of(with_spec(podMetadata={"labels": labels}))[path]


def test_label_values_may_be_empty_and_keys_prefixed() -> None:
    labels = {"example.com/tier": "", "a.b-c_d": "X.y-z_1"}
    assert errors_of(with_spec(podMetadata={"labels": labels})) == {}


def test_annotation_keys_and_total_size() -> None:
    errors = errors_of(with_spec(podMetadata={"annotations": {"bad key": "v"}}))
    assert "annotation key" in errors["spec.podMetadata.annotations[bad key]"]
    # Annotation keys are checked case-insensitively in the prefix, values are free.
    assert errors_of(with_spec(podMetadata={"annotations": {"Example.COM/x": "any value"}})) == {}
    big = {"a": "x" * (128 * 1024), "b": "y" * (128 * 1024)}
    errors = errors_of(with_spec(podMetadata={"annotations": big}))
    assert "at most 262144 bytes" in errors["spec.podMetadata.annotations"]


def test_node_selector_syntax() -> None:
    errors = errors_of(with_spec(scheduling={"nodeSelector": {"bad key": "v"}}))
    assert "node selector key" in errors["spec.scheduling.nodeSelector[bad key]"]


def test_node_selector_value_syntax() -> None:
    errors = errors_of(with_spec(scheduling={"nodeSelector": {"zone": "a b"}}))
    assert "label value" in errors["spec.scheduling.nodeSelector[zone]"]


@pytest.mark.parametrize(
    ("toleration", "field", "fragment"),
    [
        ({"operator": "Equal", "value": "v"}, "operator", "operator must be Exists when `key`"),
        ({"value": "v"}, "operator", "operator must be Exists when `key` is empty"),
        ({"key": "k", "operator": "Exists", "value": "v"}, "value", "value must be empty"),
        ({"key": "k", "operator": "Gt"}, "operator", "supported values: Equal, Exists"),
        ({"key": "k", "effect": "NoRun"}, "effect", "NoSchedule, PreferNoSchedule, NoExecute"),
        (
            {"key": "k", "effect": "NoSchedule", "tolerationSeconds": 30},
            "effect",
            "effect must be 'NoExecute' when `tolerationSeconds` is set",
        ),
        ({"key": "bad key", "operator": "Exists"}, "key", "name part"),
        ({"key": "k", "value": "bad value"}, "value", "label value"),
    ],
)
def test_toleration_rules(toleration: dict[str, Any], field: str, fragment: str) -> None:
    errors = errors_of(with_spec(scheduling={"tolerations": [toleration]}))
    assert fragment in errors[f"spec.scheduling.tolerations[0].{field}"]


@pytest.mark.parametrize(
    "toleration",
    [
        {"operator": "Exists"},
        {
            "key": "k",
            "operator": "Equal",
            "value": "v",
            "effect": "NoExecute",
            "tolerationSeconds": 60,
        },
        {"key": "k", "value": ""},
        {"key": "example.com/gpu", "operator": "Exists", "effect": "PreferNoSchedule"},
    ],
)
def test_valid_tolerations(toleration: dict[str, Any]) -> None:
    assert errors_of(with_spec(scheduling={"tolerations": [toleration]})) == {}


NODE = "spec.scheduling.affinity.nodeAffinity"
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


def _node_term(*expressions: dict[str, Any], fields: Any = None) -> dict[str, Any]:
    term: dict[str, Any] = {"matchExpressions": list(expressions)}
    if fields is not None:
        term["matchFields"] = fields
    return {"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": [term]}}}


@pytest.mark.parametrize(
    ("affinity", "path", "fragment"),
    [
        (
            {"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": []}}},
            f"{NODE}.{REQUIRED}.nodeSelectorTerms",
            "at least one node selector term",
        ),
        (
            _node_term({"key": "zone", "operator": "In"}),
            f"{NODE}.{REQUIRED}.nodeSelectorTerms[0].matchExpressions[0].values",
            "must be specified when `operator` is 'In' or 'NotIn'",
        ),
        (
            _node_term({"key": "zone", "operator": "Exists", "values": ["a"]}),
            f"{NODE}.{REQUIRED}.nodeSelectorTerms[0].matchExpressions[0].values",
            "may not be specified",
        ),
        (
            _node_term({"key": "cores", "operator": "Gt", "values": ["1", "2"]}),
            f"{NODE}.{REQUIRED}.nodeSelectorTerms[0].matchExpressions[0].values",
            "single value",
        ),
        (
            _node_term({"key": "cores", "operator": "Lt", "values": ["many"]}),
            f"{NODE}.{REQUIRED}.nodeSelectorTerms[0].matchExpressions[0].values[0]",
            "must be an integer",
        ),
        (
            _node_term({"key": "zone", "operator": "Near", "values": ["a"]}),
            f"{NODE}.{REQUIRED}.nodeSelectorTerms[0].matchExpressions[0].operator",
            "unsupported operator",
        ),
        (
            _node_term({"key": "bad key", "operator": "Exists"}),
            f"{NODE}.{REQUIRED}.nodeSelectorTerms[0].matchExpressions[0].key",
            "name part",
        ),
        (
            _node_term(fields=[{"key": "metadata.uid", "operator": "In", "values": ["n"]}]),
            f"{NODE}.{REQUIRED}.nodeSelectorTerms[0].matchFields[0].key",
            "metadata.name",
        ),
        (
            _node_term(fields=[{"key": "metadata.name", "operator": "In", "values": ["a", "b"]}]),
            f"{NODE}.{REQUIRED}.nodeSelectorTerms[0].matchFields[0].values",
            "only one value",
        ),
        (
            _node_term(fields=[{"key": "metadata.name", "operator": "Exists"}]),
            f"{NODE}.{REQUIRED}.nodeSelectorTerms[0].matchFields[0].operator",
            "In, NotIn",
        ),
        (
            {"nodeAffinity": {PREFERRED: [{"weight": 0, "preference": {}}]}},
            f"{NODE}.{PREFERRED}[0].weight",
            "1-100",
        ),
        (
            {"nodeAffinity": {PREFERRED: [{"weight": 101, "preference": {}}]}},
            f"{NODE}.{PREFERRED}[0].weight",
            "1-100",
        ),
        (
            {"podAffinity": {REQUIRED: [{"topologyKey": ""}]}},
            f"spec.scheduling.affinity.podAffinity.{REQUIRED}[0].topologyKey",
            "can not be empty",
        ),
        (
            {"podAntiAffinity": {REQUIRED: [{"topologyKey": "bad key"}]}},
            f"spec.scheduling.affinity.podAntiAffinity.{REQUIRED}[0].topologyKey",
            "name part",
        ),
        (
            {
                "podAntiAffinity": {
                    PREFERRED: [
                        {
                            "weight": 200,
                            "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname"},
                        }
                    ]
                }
            },
            f"spec.scheduling.affinity.podAntiAffinity.{PREFERRED}[0].weight",
            "1-100",
        ),
        (
            {
                "podAffinity": {
                    REQUIRED: [
                        {
                            "topologyKey": "zone",
                            "labelSelector": {
                                "matchExpressions": [
                                    {"key": "app", "operator": "Equals", "values": ["x"]}
                                ]
                            },
                        }
                    ]
                }
            },
            f"spec.scheduling.affinity.podAffinity.{REQUIRED}[0].labelSelector"
            ".matchExpressions[0].operator",
            "unsupported operator",
        ),
        (
            {"podAffinity": {REQUIRED: [{"topologyKey": "zone", "namespaces": ["Bad_NS"]}]}},
            f"spec.scheduling.affinity.podAffinity.{REQUIRED}[0].namespaces[0]",
            "RFC 1123 label",
        ),
        (
            {"podAffinity": {REQUIRED: [{"topologyKey": "zone", "matchLabelKeys": ["a"]}]}},
            f"spec.scheduling.affinity.podAffinity.{REQUIRED}[0].matchLabelKeys",
            "labelSelector is not set",
        ),
        (
            {
                "podAffinity": {
                    REQUIRED: [
                        {
                            "topologyKey": "zone",
                            "labelSelector": {},
                            "matchLabelKeys": ["a"],
                            "mismatchLabelKeys": ["a"],
                        }
                    ]
                }
            },
            f"spec.scheduling.affinity.podAffinity.{REQUIRED}[0].mismatchLabelKeys[0]",
            "exists in both",
        ),
    ],
)
def test_affinity_rules(affinity: dict[str, Any], path: str, fragment: str) -> None:
    errors = errors_of(with_spec(scheduling={"affinity": affinity}))
    assert fragment in errors[path]


def test_valid_affinity() -> None:
    affinity = {
        "nodeAffinity": {
            REQUIRED: {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                            {"key": "cores", "operator": "Gt", "values": ["4"]},
                        ],
                        "matchFields": [
                            {"key": "metadata.name", "operator": "NotIn", "values": ["n1"]}
                        ],
                    }
                ]
            },
            PREFERRED: [
                {
                    "weight": 100,
                    "preference": {
                        "matchExpressions": [{"key": "spot", "operator": "DoesNotExist"}]
                    },
                }
            ],
        },
        "podAntiAffinity": {
            PREFERRED: [
                {
                    "weight": 1,
                    "podAffinityTerm": {
                        "topologyKey": "kubernetes.io/hostname",
                        "labelSelector": {"matchLabels": {"app.kubernetes.io/name": "trussium"}},
                        "matchLabelKeys": ["pod-template-hash"],
                    },
                }
            ]
        },
    }
    assert errors_of(with_spec(scheduling={"affinity": affinity})) == {}


@pytest.mark.parametrize(
    ("resources", "path", "fragment"),
    [
        (
            {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}},
            "spec.resources.requests[cpu]",
            "must be less than or equal to cpu limit of 1",
        ),
        (
            {"requests": {"memory": "1Gi"}, "limits": {"memory": "1G"}},
            "spec.resources.requests[memory]",
            "less than or equal to memory limit of 1G",
        ),
        ({"limits": {"cpu": "-1"}}, "spec.resources.limits[cpu]", "greater than or equal to 0"),
        ({"limits": {"cpu": "1e1.5"}}, "spec.resources.limits[cpu]", "is not a quantity"),
        ({"limits": {"gpu": "1"}}, "spec.resources.limits[gpu]", "standard resource"),
        ({"limits": {"Bad Name": "1"}}, "spec.resources.limits[Bad Name]", "name part"),
        (
            {"limits": {"example.com/gpu": "500m"}},
            "spec.resources.limits[example.com/gpu]",
            "must be an integer",
        ),
        (
            {"requests": {"example.com/gpu": "1"}},
            "spec.resources.limits[example.com/gpu]",
            "Limit must be set",
        ),
        (
            {"requests": {"example.com/gpu": "1"}, "limits": {"example.com/gpu": "2"}},
            "spec.resources.requests[example.com/gpu]",
            "must be equal to example.com/gpu limit",
        ),
        (
            {"limits": {"hugepages-2Mi": "3Mi", "memory": "1Gi"}},
            "spec.resources.limits[hugepages-2Mi]",
            "multiple of the page size 2Mi",
        ),
        ({"limits": {"hugepages-2Mi": "4Mi"}}, "spec.resources", "HugePages require cpu or memory"),
        ({"claims": [{"request": "r"}]}, "spec.resources.claims[0].name", "Required value"),
        ({"claims": [{"name": ""}]}, "spec.resources.claims[0].name", "must not be empty"),
        (
            {"claims": [{"name": "gpu"}, {"name": "gpu", "request": "b"}]},
            "spec.resources.claims",
            "duplicate name 'gpu'",
        ),
        ({"claims": [{"name": "GPU"}]}, "spec.resources.claims[0].name", "RFC 1123 label"),
        (
            {"claims": [{"name": "gpu", "request": "a_b"}]},
            "spec.resources.claims[0].request",
            "RFC 1123 label",
        ),
        ({"claims": [{"name": "gpu", "size": 1}]}, "spec.resources.claims[0].size", "unknown"),
    ],
)
def test_resource_rules(resources: dict[str, Any], path: str, fragment: str) -> None:
    assert fragment in errors_of(with_spec(resources=resources))[path]


def test_valid_resources() -> None:
    resources = {
        "requests": {"cpu": "500m", "memory": 268435456, "example.com/gpu": 1},
        "limits": {
            "cpu": "0.5",
            "memory": "256Mi",
            "example.com/gpu": "1",
            "hugepages-2Mi": "4Mi",
            "ephemeral-storage": "1e9",
        },
    }
    assert errors_of(with_spec(resources=resources)) == {}


EPHEMERAL_1GI = {"limits": {"ephemeral-storage": "1Gi"}}


@pytest.mark.parametrize(
    ("scratch", "resources", "fragment"),
    [
        ({"sizeLimit": "16M"}, None, "must be at least 16Mi"),
        ({"sizeLimit": 512}, None, "must be at least 16Mi"),  # bytes, not MiB
        ({"sizeLimit": "-1Gi"}, None, "must be at least 16Mi"),
        ({"sizeLimit": "1Gi "}, None, "is not a quantity"),
        ({"sizeLimit": True}, None, "must be a quantity"),
        ({"sizeLimit": "1e1000000"}, None, "out of range"),
        ({"sizeLimit": "2Gi"}, EPHEMERAL_1GI, "at most spec.resources.limits[ephemeral-storage]"),
        ({"sizeLimit": "1025Mi"}, EPHEMERAL_1GI, "so the Pod would be evicted before it is full"),
        ({"size": "1Gi"}, None, "unknown field"),
    ],
)
def test_scratch_rules(scratch: dict[str, Any], resources: Any, fragment: str) -> None:
    path = "spec.scratch.size" if "size" in scratch else "spec.scratch.sizeLimit"
    assert fragment in errors_of(with_spec(scratch=scratch, resources=resources))[path]


@pytest.mark.parametrize(
    ("scratch", "resources"),
    [
        ({}, None),
        ({"sizeLimit": "16Mi"}, None),
        ({"sizeLimit": 2**40}, None),
        ({"sizeLimit": "1Gi"}, EPHEMERAL_1GI),
        ({"sizeLimit": "1G"}, EPHEMERAL_1GI),
        # A request is a reservation, not a bound.
        ({"sizeLimit": "4Gi"}, {"requests": {"ephemeral-storage": "1Gi"}}),
        # No scratch section, whatever the limit: the default is capped at it.
        (None, {"limits": {"ephemeral-storage": "20Mi"}}),
    ],
)
def test_valid_scratch(scratch: Any, resources: Any) -> None:
    assert errors_of(with_spec(scratch=scratch, resources=resources)) == {}


@pytest.mark.parametrize(
    "repository", ["Ghcr.io/Trussium/Runtime", "ghcr.io//runtime", "ghcr.io/runtime/", "a:b:c/d"]
)
def test_rendered_image_must_be_a_valid_reference(repository: str) -> None:
    errors = errors_of(with_spec(image={"repository": repository, "tag": "1"}))
    assert "is not a valid image reference" in errors["spec.image.repository"]


@pytest.mark.parametrize(
    "image",
    [
        {"repository": "localhost:5000/trussium/runtime", "tag": "1.0"},
        {"repository": "Registry.Example.com/team/rt", "tag": "v1"},
        {"repository": "runtime", "digest": "sha256:" + "0" * 64},
    ],
)
def test_valid_image_references(image: dict[str, Any]) -> None:
    assert errors_of(with_spec(image=image)) == {}


def test_base_url_must_not_carry_credentials_and_is_never_echoed() -> None:
    provider = {"type": "openai", "model": "m", "baseURL": "https://user:s3cr3t@api.example.com"}
    result = validate_runtime(with_spec(provider=provider))
    (error,) = result.errors
    assert error.path == "spec.provider.baseURL"
    assert "credentials" in error.message
    assert "s3cr3t" not in repr(result)


def test_autoscaling_needs_a_cpu_request() -> None:
    obj = with_spec(autoscaling={"enabled": True}, resources={"requests": {"memory": "1Gi"}})
    assert "requests.cpu" in errors_of(obj)["spec.autoscaling.enabled"]
    obj["spec"]["resources"]["requests"]["cpu"] = "100m"
    assert errors_of(obj) == {}


# --- warnings


def test_mutable_latest_tag_is_a_warning() -> None:
    result = validate_runtime(with_spec(image={"repository": "r", "tag": "latest"}))
    assert result.allowed
    assert any("spec.image.tag" in w and "latest" in w for w in result.warnings)


def test_replicas_set_while_autoscaling_is_a_warning() -> None:
    autoscaling = {"enabled": True}
    result = validate_runtime(with_spec(replicas=3, autoscaling=autoscaling))
    assert result.allowed
    assert any(w.startswith("spec.replicas:") for w in result.warnings)
    quiet = validate_runtime(with_spec(replicas=None, autoscaling=autoscaling))
    assert not any(w.startswith("spec.replicas:") for w in quiet.warnings)


def test_missing_secrets_are_warnings_only_when_known() -> None:
    result = with_missing_secrets(validate_runtime(VALID), frozenset({"regcred"}))
    assert result.allowed
    assert result.warnings == (
        "spec.provider.credentialsSecretRef.name: Secret 'openai' does not exist in this "
        "namespace yet; the runtime is not deployed until it does",
    )
    assert validate_runtime(VALID).warnings == ()


# --- ratcheting


def test_unchanged_old_violation_becomes_a_warning_on_update() -> None:
    old = with_spec(podMetadata={"labels": {"app.kubernetes.io/name": "legacy"}})
    new = copy.deepcopy(old)
    new["spec"]["replicas"] = 2
    result = validate_runtime(new, old)
    assert result.allowed
    assert any("app.kubernetes.io/name" in w and "already present" in w for w in result.warnings)


def test_new_or_changed_violations_still_fail_on_update() -> None:
    old = with_spec(podMetadata={"labels": {"bad key": "v"}})
    new = with_spec(podMetadata={"labels": {"bad key": "v", "other bad": "v"}}, replicas=-1)
    # The old violation freezes the runtime, so a spec change must fix it too.
    assert set(errors_of(new, old=old)) == {
        "spec.podMetadata.labels[bad key]",
        "spec.podMetadata.labels[other bad]",
        "spec.replicas",
    }


def test_schema_errors_are_the_schema_subset() -> None:
    obj = with_spec(replicas=-1, podMetadata={"labels": {"bad key": "v"}})
    assert schema_errors(obj) == (
        FieldError("spec.replicas", "must be greater than or equal to 0"),
    )
    assert schema_errors(VALID) == ()
