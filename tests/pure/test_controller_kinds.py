"""The registry of managed kinds is what the controller applies, watches and caches."""

from typing import Any

from trussium_operator.common.api import TrussiumRuntime
from trussium_operator.common.status import Outcome
from trussium_operator.controller.runtime.kinds import (
    MANAGED_KINDS,
    disabled_kinds,
    render_managed_objects,
)
from trussium_operator.controller.runtime.secret_presence import SecretPresence
from trussium_operator.controller.runtime.watches import watch_table

EVERY_FEATURE: dict[str, Any] = {
    "image": {"repository": "ghcr.io/trussium/runtime", "tag": "1.4.0"},
    "provider": {"type": "openai", "model": "gpt-4o-mini"},
    "networkPolicy": {"enabled": True, "ingress": [{"namespaceSelector": {}}]},
    "autoscaling": {"enabled": True},
    "resources": {"requests": {"cpu": "100m"}},
    "observability": {"monitor": {"enabled": True}},
}


def runtime(spec: dict[str, Any]) -> TrussiumRuntime:
    meta = {"name": "demo", "namespace": "prod", "uid": "u-1", "generation": 1}
    return TrussiumRuntime.model_validate({"metadata": meta, "spec": spec})


def test_each_kind_renders_the_api_version_and_kind_its_entry_names() -> None:
    rendered = render_managed_objects(runtime(EVERY_FEATURE))
    assert [(o["apiVersion"], o["kind"]) for o in rendered] == [
        (k.resource.api_version, k.kind) for k in MANAGED_KINDS
    ]
    assert disabled_kinds(runtime(EVERY_FEATURE)) == []


def test_the_watch_table_owns_every_kind_of_the_registry_it_is_given() -> None:
    owned = [w for w in watch_table(SecretPresence()) if w.role not in ("runtimes", "secrets")]
    assert [(w.role, w.resource, w.optional) for w in owned] == [
        (k.kind, k.resource, k.optional) for k in MANAGED_KINDS
    ]
    only_two = watch_table(SecretPresence(), MANAGED_KINDS[:2])
    assert [w.role for w in only_two] == ["runtimes", "ConfigMap", "ServiceAccount", "secrets"]


def test_without_secret_checks_nothing_watches_secrets() -> None:
    roles = [w.role for w in watch_table(SecretPresence(checked=False), MANAGED_KINDS[:1])]
    assert roles == ["runtimes", "ConfigMap"]
    outcome = SecretPresence(checked=False).check("prod", ["a", "b"])
    assert outcome == Outcome(unchecked_secrets=("a", "b"))
