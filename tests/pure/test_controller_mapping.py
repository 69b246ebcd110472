"""Which changes enqueue which TrussiumRuntime (the watch predicates and mappers)."""

from typing import Any

import pytest

from trussium_operator.controller.machinery.cache import Change, Store
from trussium_operator.controller.machinery.names import NamespacedName
from trussium_operator.controller.runtime import mapping
from trussium_operator.controller.runtime.mapping import SecretReferences, owner_of, runtime_change

A = NamespacedName("ns", "a")


def runtime(name: str, generation: int = 1, namespace: str = "ns", **spec: Any) -> dict[str, Any]:
    base = {
        "image": {"repository": "ghcr.io/trussium/runtime", "tag": "1.0.0"},
        "provider": {"type": "openai", "model": "gpt"},
    }
    return {
        "metadata": {"name": name, "namespace": namespace, "generation": generation},
        "spec": base | spec,
    }


def test_runtime_adds_and_deletes_enqueue() -> None:
    assert runtime_change(Change(None, runtime("a"))) == [A]
    assert runtime_change(Change(runtime("a"), None)) == [A]


def test_runtime_update_enqueues_only_when_generation_moves() -> None:
    old = runtime("a", generation=1)
    status_only = runtime("a", generation=1) | {"status": {"readyReplicas": 1}}
    assert runtime_change(Change(old, status_only)) == [], "a status write must not loop"
    assert runtime_change(Change(old, runtime("a", generation=2))) == [A]


def owned(references: list[dict[str, Any]]) -> dict[str, Any]:
    return {"metadata": {"name": "x", "namespace": "ns", "ownerReferences": references}}


def test_owned_object_maps_to_its_controlling_runtime() -> None:
    reference = {
        "apiVersion": "runtime.trussium.io/v1alpha1",
        "kind": "TrussiumRuntime",
        "name": "a",
        "controller": True,
    }
    assert owner_of(Change(None, owned([reference]))) == [A]
    assert owner_of(Change(owned([reference]), None)) == [A], "deletes map too"


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


CREDENTIALS = {"type": "openai", "model": "m", "credentialsSecretRef": {"name": "s", "key": "k"}}


def runtimes_store() -> tuple[Store, SecretReferences]:
    references = SecretReferences()
    return Store(index=references), references


def test_secret_maps_to_every_runtime_in_its_namespace_that_references_it() -> None:
    store, references = runtimes_store()
    for obj in (
        runtime("by-pull-secret", imagePullSecrets=[{"name": "s"}]),
        runtime("by-credentials", provider=CREDENTIALS),
        runtime("unrelated", imagePullSecrets=[{"name": "other"}]),
        runtime("no-references"),
        runtime("elsewhere", namespace="other", provider=CREDENTIALS),
    ):
        store.upsert(obj)
    keys = references.runtimes_referencing(Change(None, secret("s")))
    assert [str(k) for k in keys] == ["ns/by-credentials", "ns/by-pull-secret"]
    assert references.runtimes_referencing(Change(secret("s", "third"), None)) == []


def test_the_secret_index_follows_spec_changes_deletes_and_relists() -> None:
    store, references = runtimes_store()
    store.upsert(runtime("a", provider=CREDENTIALS))
    store.upsert(runtime("a", generation=2, imagePullSecrets=[{"name": "pull"}]))
    assert references.runtimes_referencing(Change(None, secret("s"))) == []
    assert references.runtimes_referencing(Change(None, secret("pull"))) == [A]
    store.delete(runtime("a"))
    assert references.runtimes_referencing(Change(None, secret("pull"))) == []
    store.replace([runtime("a", provider=CREDENTIALS), runtime("b", provider=CREDENTIALS)])
    referencing = references.runtimes_referencing(Change(None, secret("s")))
    assert referencing == [A, NamespacedName("ns", "b")]
    store.replace([runtime("b", provider=CREDENTIALS)])
    assert references.runtimes_referencing(Change(None, secret("s"))) == [NamespacedName("ns", "b")]


def test_a_runtime_is_parsed_once_per_spec_change(monkeypatch: pytest.MonkeyPatch) -> None:
    parsed: list[dict[str, Any]] = []
    parse = mapping._secret_names

    def counted(obj: dict[str, Any]) -> list[str]:
        parsed.append(obj)
        return parse(obj)

    monkeypatch.setattr(mapping, "_secret_names", counted)
    store, references = runtimes_store()
    store.upsert(runtime("a", provider=CREDENTIALS))
    store.upsert(runtime("a", provider=CREDENTIALS) | {"status": {"observedGeneration": 1}})
    store.replace([runtime("a", provider=CREDENTIALS) | {"status": {"observedGeneration": 1}}])
    assert len(parsed) == 1, "a status write or a relist leaves the spec alone"
    assert references.runtimes_referencing(Change(None, secret("s"))) == [A]
    store.upsert(runtime("a", generation=2, provider=CREDENTIALS, replicas=2))
    assert len(parsed) == 2


def test_secret_mapping_skips_a_runtime_whose_spec_does_not_parse() -> None:
    store, references = runtimes_store()
    store.upsert({"metadata": {"name": "b", "namespace": "ns"}, "spec": {"image": 3}})
    assert references.runtimes_referencing(Change(None, secret("s"))) == []
