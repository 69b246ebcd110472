"""Which changes enqueue which TrussiumRuntime (the watch predicates and mappers)."""

from typing import Any

from controller.cache import Change
from controller.mapping import owner_of, runtime_change, runtimes_referencing_secret


def runtime(name: str, generation: int = 1, **spec: Any) -> dict[str, Any]:
    base = {
        "image": {"repository": "ghcr.io/trussium/runtime", "tag": "1.0.0"},
        "provider": {"type": "openai", "model": "gpt"},
    }
    return {
        "metadata": {"name": name, "namespace": "ns", "generation": generation},
        "spec": base | spec,
    }


def test_runtime_adds_and_deletes_enqueue() -> None:
    assert runtime_change(Change(None, runtime("a"))) == ["ns/a"]
    assert runtime_change(Change(runtime("a"), None)) == ["ns/a"]


def test_runtime_update_enqueues_only_when_generation_moves() -> None:
    old = runtime("a", generation=1)
    status_only = runtime("a", generation=1) | {"status": {"readyReplicas": 1}}
    assert runtime_change(Change(old, status_only)) == [], "a status write must not loop"
    assert runtime_change(Change(old, runtime("a", generation=2))) == ["ns/a"]


def owned(references: list[dict[str, Any]]) -> dict[str, Any]:
    return {"metadata": {"name": "x", "namespace": "ns", "ownerReferences": references}}


def test_owned_object_maps_to_its_controlling_runtime() -> None:
    reference = {
        "apiVersion": "runtime.trussium.io/v1alpha1",
        "kind": "TrussiumRuntime",
        "name": "a",
        "controller": True,
    }
    assert owner_of(Change(None, owned([reference]))) == ["ns/a"]
    assert owner_of(Change(owned([reference]), None)) == ["ns/a"], "deletes map too"


def test_owned_object_without_a_runtime_controller_maps_to_nothing() -> None:
    not_controller = {
        "apiVersion": "runtime.trussium.io/v1alpha1",
        "kind": "TrussiumRuntime",
        "name": "a",
    }
    other_kind = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "a", "controller": True}
    assert owner_of(Change(None, owned([not_controller, other_kind]))) == []


def secret(name: str, namespace: str = "ns") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace}}


def test_secret_maps_to_every_runtime_in_its_namespace_that_references_it() -> None:
    credentials = {
        "type": "openai",
        "model": "m",
        "credentialsSecretRef": {"name": "s", "key": "k"},
    }
    runtimes = [
        runtime("by-credentials", provider=credentials),
        runtime("by-pull-secret", imagePullSecrets=[{"name": "s"}]),
        runtime("unrelated", imagePullSecrets=[{"name": "other"}]),
        runtime("no-references"),
    ]
    keys = runtimes_referencing_secret(Change(None, secret("s")), runtimes)
    assert keys == ["ns/by-credentials", "ns/by-pull-secret"]
    assert runtimes_referencing_secret(Change(secret("s", "elsewhere"), None), runtimes) == []


def test_secret_mapping_skips_a_runtime_whose_spec_does_not_parse() -> None:
    broken = {"metadata": {"name": "b", "namespace": "ns"}, "spec": {"image": 3}}
    assert runtimes_referencing_secret(Change(None, secret("s")), [broken]) == []
