"""Hypothesis strategies for TrussiumRuntime objects: valid ones, and arbitrary JSON."""

from typing import Any

from hypothesis import strategies as st

NAMES = st.from_regex(r"\A[a-z0-9]([-a-z0-9]{0,10}[a-z0-9])?\Z")
# A runtime's name becomes its Service's: a DNS-1035 label.
RUNTIME_NAMES = st.from_regex(r"\A[a-z]([-a-z0-9]{0,10}[a-z0-9])?\Z")
LABEL_VALUES = st.from_regex(r"\A([A-Za-z0-9]([-A-Za-z0-9_.]{0,8}[A-Za-z0-9])?)?\Z")
QUANTITIES = st.one_of(
    st.integers(0, 64),
    st.sampled_from(["100m", "250m", "1", "2", "500Mi", "1Gi", "1.5", "2e3", "64Ki"]),
)


def json_values(max_leaves: int = 20) -> st.SearchStrategy[Any]:
    scalars = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**40), 2**40),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=12),
    )
    return st.recursive(
        scalars,
        lambda inner: st.one_of(
            st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=10), inner, max_size=4)
        ),
        max_leaves=max_leaves,
    )


SCALING_RULES = st.fixed_dictionaries(
    {},
    optional={
        "stabilizationWindowSeconds": st.integers(0, 3600),
        "selectPolicy": st.sampled_from(["Max", "Min", "Disabled"]),
        "policies": st.lists(
            st.fixed_dictionaries(
                {
                    "type": st.sampled_from(["Pods", "Percent"]),
                    "value": st.integers(1, 2**31 - 1),
                    "periodSeconds": st.integers(1, 1800),
                }
            ),
            min_size=1,
            max_size=5,
        ),
    },
)


@st.composite
def specs(draw: st.DrawFn) -> dict[str, Any]:
    """A schema-valid spec, with optional parts present or absent."""
    image: dict[str, Any] = {"repository": draw(st.sampled_from(["ghcr.io/t/rt", "rt", "a/b"]))}
    if draw(st.booleans()):
        image["tag"] = draw(st.sampled_from(["1.0.0", "v2", "latest"]))
    else:
        image["digest"] = "sha256:" + draw(st.binary(min_size=32, max_size=32)).hex()
    if draw(st.booleans()):
        image["pullPolicy"] = draw(st.sampled_from(["Always", "IfNotPresent", "Never"]))
    spec: dict[str, Any] = {
        "image": image,
        "provider": {"type": draw(st.sampled_from(["openai", "ollama"])), "model": "m"},
    }
    optional: dict[str, st.SearchStrategy[Any]] = {
        "replicas": st.integers(0, 1000),
        "imagePullSecrets": st.lists(NAMES, max_size=3, unique=True).map(
            lambda names: [{"name": n} for n in names]
        ),
        "service": st.fixed_dictionaries(
            {},
            optional={
                "type": st.sampled_from(["ClusterIP", "NodePort", "LoadBalancer"]),
                "port": st.integers(1, 65535),
            },
        ),
        "networkPolicy": st.one_of(
            st.just({}),
            st.just({"enabled": False}),
            st.just({"enabled": True, "ingress": [{"namespaceSelector": {}}]}),
        ),
        "autoscaling": st.integers(1, 10).flatmap(
            lambda low: st.fixed_dictionaries(
                {},
                optional={
                    "minReplicas": st.just(low),
                    "maxReplicas": st.integers(max(low, 10), 1000),
                    "targetCPUUtilizationPercentage": st.integers(1, 100),
                    "inFlightRequests": st.fixed_dictionaries(
                        {"targetPerPod": st.integers(1, 100000)},
                        optional={"metricName": st.sampled_from(["in_flight", "a:b_c"])},
                    ),
                    "behavior": st.fixed_dictionaries(
                        {}, optional={"scaleUp": SCALING_RULES, "scaleDown": SCALING_RULES}
                    ),
                },
            )
        ),
        "resources": st.fixed_dictionaries(
            {},
            optional={
                "requests": st.dictionaries(st.sampled_from(["memory"]), QUANTITIES, max_size=1),
            },
        ),
        "scratch": st.fixed_dictionaries(
            {}, optional={"sizeLimit": st.sampled_from(["16Mi", "500M", "1Gi", 2**32])}
        ),
        "podMetadata": st.fixed_dictionaries(
            {}, optional={"labels": st.dictionaries(NAMES, LABEL_VALUES, max_size=3)}
        ),
        "runtime": st.fixed_dictionaries(
            {}, optional={"shutdownDrainTimeoutSeconds": st.integers(1, 3600)}
        ),
    }
    for key, strategy in optional.items():
        if draw(st.booleans()):
            spec[key] = draw(strategy)
    return spec


@st.composite
def runtimes(draw: st.DrawFn) -> dict[str, Any]:
    return {
        "apiVersion": "runtime.trussium.io/v1alpha1",
        "kind": "TrussiumRuntime",
        "metadata": {"name": draw(RUNTIME_NAMES), "namespace": "default"},
        "spec": draw(specs()),
    }
