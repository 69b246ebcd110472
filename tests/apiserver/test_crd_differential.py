"""Differential test: the installed CRD accepts exactly what `schema_errors` accepts.

A seeded generator mutates valid specs with boundary values, wrong types,
bad patterns, unknown fields and nulls; every variant goes to the real API
server as a server-side dry run with strict field validation (kubectl's
default). A disagreement would mean the offline validator and a cluster
without the webhook give different verdicts.
"""

import asyncio
import copy
import random
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes_asyncio import client

from devcluster import ControlPlane
from devcluster.hostoperator import install_crds
from trussium_operator.common import constants
from trussium_operator.common.parsing import schema_errors

pytestmark = pytest.mark.api

SEED = 20261129
VARIANTS = 400
DIGEST = "sha256:" + "d" * 64

BASE: dict[str, Any] = {
    "image": {"repository": "ghcr.io/trussium/runtime", "tag": "1.4.2"},
    "replicas": 2,
    "imagePullSecrets": [{"name": "regcred"}],
    "provider": {
        "type": "openai",
        "model": "gpt-4o-mini",
        "baseURL": "https://api.example.com/v1",
        "credentialsSecretRef": {"name": "openai", "key": "api-key"},
    },
    "runtime": {"providerRequestTimeoutSeconds": 60},
    "service": {"type": "ClusterIP", "port": 9000},
    "networkPolicy": {"enabled": True, "ingress": [{"namespaceSelector": {}}]},
    "autoscaling": {"enabled": False, "minReplicas": 1, "maxReplicas": 5},
    "resources": {"requests": {"cpu": "250m"}, "limits": {"memory": "1Gi"}},
    "podMetadata": {"labels": {"team": "ml"}, "annotations": {"a": "b"}},
    "scheduling": {
        "nodeSelector": {"zone": "a"},
        "tolerations": [{"key": "k", "operator": "Exists", "tolerationSeconds": 5}],
        "affinity": {
            "nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 5,
                        "preference": {"matchExpressions": [{"key": "x", "operator": "In"}]},
                    }
                ]
            }
        },
    },
}

WRONG_TYPES: list[Any] = ["1", 1, 1.5, 2.0, True, None, [], {}, [1], {"a": 1}]


def _ints(low: int, high: int) -> list[Any]:
    return [low - 1, low, high, high + 1, 2**31, -(2**31) - 1, 2**62]


def _strings(max_length: int) -> list[Any]:
    return ["", "a", "a" * max_length, "a" * (max_length + 1), "A b", "a\n", "-a", "ü"]


# (path under spec, candidate values): each variant sets one to three of these.
CANDIDATES: list[tuple[tuple[str, ...], list[Any]]] = [
    (("image", "repository"), [*_strings(255), "ghcr.io/a/b", "Ghcr.io/X", "a:b", ":a"]),
    (("image", "tag"), [*_strings(128), "_x", "x" * 129, ".x", "v1.0-rc_1", None]),
    (("image", "digest"), [DIGEST, "sha256:" + "D" * 64, "sha256:abc", DIGEST + "0", None]),
    (("image", "pullPolicy"), ["Always", "Never", "always", "", None]),
    (("image", "extra"), ["x"]),
    (("replicas",), _ints(0, 1000)),
    (
        ("imagePullSecrets",),
        [
            [],
            [{"name": "a"}, {"name": "a"}],
            [{"name": f"s{i}"} for i in range(20)],
            [{"name": f"s{i}"} for i in range(21)],
            [{}],
            [{"name": "A"}],
            [{"name": "a", "key": "b"}],
            [{"name": "a" * 254}],
        ],
    ),
    (("provider", "type"), ["openai", "ollama", "OpenAI", "", None]),
    (("provider", "model"), _strings(255)),
    (
        ("provider", "baseURL"),
        [
            "http://ollama:11434",
            "https://h/v1?x=1",
            "HTTP://h",
            "ftp://h",
            "/v1",
            "http://",
            "h:80",
            "http://:80",
            "http://h:port",
            "http://h:99999",
            "http://[::1]:80/",
            "http://[::1",
            "http://a b",
            "http://h/%zz",
            "http://h/%41",
            "http://u:p@h",
            "http://u p@h",
            "http://h#f",
            "https://" + "h" * 2040,
            "https://" + "h" * 2041,
            "",
            "mailto:x@y",
            "http://h\t",
        ],
    ),
    (
        ("provider", "credentialsSecretRef"),
        [
            {"name": "s"},
            {"key": "k"},
            {"name": "s", "key": "a b"},
            {"name": "s", "key": "a" * 254},
            {"name": "s", "key": "k", "x": 1},
        ],
    ),
    (("runtime", "streamIdleTimeoutSeconds"), _ints(1, 3600)),
    (("runtime", "shutdownDrainTimeoutSeconds"), ["30", 30.0, 30.5]),
    (("runtime", "serviceCleanupTimeoutSeconds"), [0, 0.001, 2.5, 3600, 3600.5, -1, "1", True]),
    (("readiness", "dependencyChecks"), [True, False, "true", 1, None]),
    (("readiness", "dependencyTimeoutSeconds"), [0, 1, 1.5, 1.999, 2, 2.0, 2.5, "1", None]),
    (("readiness", "dependencyCacheSeconds"), [0, 0.5, 3600, 3601]),
    (("readiness", "requiredModel"), ["m", "gpt-4o mini", " m", "m\t", "\u00a0m", "", "a" * 256]),
    (("readiness",), [{}, None, {"unknown": 1}]),
    (
        ("reranking",),
        [
            {"baseURL": "http://tei:8080"},
            {},
            {"baseURL": "tei:8080"},
            {"baseURL": "http://tei:8080", "credentialsSecretRef": {"name": "tei"}},
        ],
    ),
    (("observability", "metrics"), [False, "false"]),
    (("observability", "tracing", "sampleRatio"), [0, 1, 0.25, 1.01, -0.01, "0.5"]),
    (("observability", "tracing", "serviceName"), ["chat", "", " chat"]),
    (("observability", "tracing", "otlpEndpoint"), ["http://c:4318/v1/traces", "c:4318", ""]),
    (("observability", "tracing", "exportTimeoutSeconds"), [0, 10, 1e-9]),
    (("service", "type"), ["NodePort", "LoadBalancer", "ExternalName", None]),
    (("service", "port"), _ints(1, 65535)),
    (("service",), [None, {}, "x"]),
    (("networkPolicy", "enabled"), [True, False, "true", None, 0]),
    (
        ("networkPolicy", "ingress"),
        [
            None,
            [],
            [{}],
            [{"namespaceSelector": {"matchLabels": {"a": "b"}}, "podSelector": {}}],
            [{"namespaceSelector": {"matchExpressions": [{"key": "a"}]}}],
        ],
    ),
    (("autoscaling", "enabled"), [True, "yes", None]),
    (("autoscaling", "minReplicas"), [*_ints(1, 1000), 5, 6]),
    (("autoscaling", "maxReplicas"), [*_ints(1, 1000), 5, 4]),
    (("autoscaling", "targetCPUUtilizationPercentage"), _ints(1, 100)),
    (("autoscaling",), [{}, {"minReplicas": 11}, None]),
    (
        ("resources", "limits", "cpu"),
        [1, -1, "1.5", 1.5, "1e1.5", "abc", "+1", ".5", "1E", "1e", "1Ki", "2 Gi", True, None],
    ),
    (("resources", "requests"), [{}, {"memory": "1Gi", "cpu": 0}, "x", {"x": []}]),
    (("resources", "claims"), [[{"name": "a"}]]),
    (("podMetadata", "labels"), [{}, {"a": ""}, {"a": 1}, {"a": None}, {"bad key": "v"}, None]),
    (("podMetadata", "annotations"), [{"k": "v" * 300}, {"k": True}]),
    (("scheduling", "nodeSelector"), [{"a": "b"}, {"a": 1}, []]),
    (
        ("scheduling", "tolerations"),
        [
            [{"key": "k", "tolerationSeconds": 2**63}],
            [{"tolerationSeconds": "5"}],
            [{"key": "k", "foo": 1}],
            [None],
            [{"effect": 1}],
        ],
    ),
    (
        ("scheduling", "affinity", "nodeAffinity"),
        [
            {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}},
            {"requiredDuringSchedulingIgnoredDuringExecution": {}},
            {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 2**31, "preference": {}}
                ]
            },
            {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1}]},
        ],
    ),
    (
        ("scheduling", "affinity", "podAffinity"),
        [
            {"requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": ""}]},
            {"requiredDuringSchedulingIgnoredDuringExecution": [{}]},
            {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"topologyKey": "z", "namespaces": [1]}
                ]
            },
        ],
    ),
    (("scheduling", "affinity", "nodeAffinity", "unknown"), [1]),
    (
        ("scheduling", "affinity", "podAntiAffinity"),
        [
            {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 1.0, "podAffinityTerm": {"topologyKey": "z"}}
                ]
            },
            {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 1.5, "podAffinityTerm": {"topologyKey": "z"}}
                ]
            },
            {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"topologyKey": "z", "labelSelector": {"matchLabels": {"a": 1}}}
                ]
            },
            {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "topologyKey": "z",
                        "labelSelector": {"matchExpressions": [{"operator": "In"}]},
                    }
                ]
            },
        ],
    ),
    (("resources", "requests", "memory"), [2.0, 2**63, -(2**63) - 1, "1e999", None]),
    (("imagePullSecrets",), [[None], [{"name": None}]]),
    (("podSpec",), [{}, None]),
    (
        ("image",),
        [None, "x", {"repository": "r"}, {"repository": "r", "tag": "1", "digest": DIGEST}],
    ),
    (("provider",), [None, {}]),
    (("replicas",), WRONG_TYPES),
    (("scheduling",), WRONG_TYPES),
]


def _set(spec: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    target = spec
    for key in path[:-1]:
        if not isinstance(target.get(key), dict):
            target[key] = {}
        target = target[key]
    target[path[-1]] = copy.deepcopy(value)


Change = tuple[tuple[str, ...], Any]


def variants() -> Iterator[list[Change]]:
    """Lists of changes to BASE: none, every candidate alone, then random combinations."""
    rng = random.Random(SEED)
    yield []
    for path, values in CANDIDATES:
        for value in values:
            yield [(path, value)]
    while True:
        yield [
            (path, rng.choice(values)) for path, values in rng.sample(CANDIDATES, rng.randint(2, 3))
        ]


def _spec(changes: list[Change]) -> dict[str, Any]:
    spec = copy.deepcopy(BASE)
    for path, value in changes:
        _set(spec, path, value)
    return spec


async def _accepted(api: client.CustomObjectsApi, namespace: str, body: dict[str, Any]) -> bool:
    try:
        await api.create_namespaced_custom_object(
            constants.GROUP,
            constants.VERSION,
            namespace,
            constants.PLURAL,
            body,
            dry_run="All",
            field_validation="Strict",
        )
    except client.ApiException as error:
        if error.status in (400, 422):
            return False
        raise
    return True


@pytest.fixture(scope="module")
def crd_installed(api_plane: ControlPlane) -> None:
    install_crds(api_plane)


@pytest.mark.usefixtures("crd_installed")
async def test_crd_and_schema_errors_agree(api_client: client.ApiClient, namespace: str) -> None:
    api = client.CustomObjectsApi(api_client)
    generated = variants()
    changes = [next(generated) for _ in range(VARIANTS)]
    bodies = [
        {
            "apiVersion": constants.API_VERSION,
            "kind": constants.KIND,
            "metadata": {"name": f"rt-{i}"},
            "spec": _spec(change),
        }
        for i, change in enumerate(changes)
    ]
    limit = asyncio.Semaphore(16)

    async def verdict(body: dict[str, Any]) -> bool:
        async with limit:
            return await _accepted(api, namespace, body)

    verdicts = await asyncio.gather(*(verdict(b) for b in bodies))
    disagreements = [
        f"{repr(change)[:200]}: server {'accepts' if server else 'rejects'}, schema_errors: "
        f"{[f'{e.path}: {e.message}' for e in schema_errors(body)]}"
        for change, body, server in zip(changes, bodies, verdicts, strict=True)
        if server != (not schema_errors(body))
    ]
    assert sum(verdicts) > VARIANTS // 10, "the generator should produce valid specs too"
    assert VARIANTS - sum(verdicts) > VARIANTS // 3, "and plenty of invalid ones"
    assert disagreements == [], f"{len(disagreements)} disagreements:\n" + "\n".join(
        disagreements[:30]
    )
