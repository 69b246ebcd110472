"""The cache forms keep what reconcile reads: status, rendering, skipped applies, takeover
and the owner mapping decide the same on a cached object as on the full one, in a
fraction of the memory."""

import copy
import gc
import json
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.deployments import DEADLINE, deployment
from trussium_operator.common.api import TrussiumRuntime
from trussium_operator.common.defaulting import apply_defaults
from trussium_operator.common.status import Outcome, compute_status
from trussium_operator.controller.machinery.cache import Change, Store
from trussium_operator.controller.migration.takeover import needs_takeover
from trussium_operator.controller.runtime.applied import AppliedObjects
from trussium_operator.controller.runtime.compact import managed_form, runtime_form
from trussium_operator.controller.runtime.kinds import MANAGED_KINDS, render_managed_objects
from trussium_operator.controller.runtime.mapping import owner_of
from trussium_operator.controller.runtime.reconciler import LEGACY_FIELD_MANAGERS

# Each managed kind's cache transform, as the watch table builds it.
FORMS = {kind.kind: managed_form(kind.reads) for kind in MANAGED_KINDS}

SAMPLES = sorted((Path(__file__).parents[1] / "samples" / "valid").glob("*.yaml"))
MINIMAL = SAMPLES[0].with_name("minimal.yaml")
NOW = "2026-12-01T00:00:00Z"
Obj = dict[str, Any]


def runtime_obj(sample: Path, name: str = "") -> Obj:
    documents: list[Obj] = list(yaml.safe_load_all(sample.read_text()))
    (obj,) = (d for d in documents if d["kind"] == "TrussiumRuntime")
    obj["metadata"] |= {
        "namespace": "team-a",
        "uid": f"uid-{name or obj['metadata']['name']}",
        "resourceVersion": "7",
        "generation": 1,
    }
    if name:
        obj["metadata"]["name"] = name
    return obj


def parsed(obj: Obj) -> TrussiumRuntime:
    return TrussiumRuntime.model_validate(apply_defaults(obj).object)


def served(rendered: Obj, status: Obj | None = None, manager: str = "trussium-operator") -> Obj:
    """`rendered` as the API server answers it: server fields, managedFields, a status."""
    obj = copy.deepcopy(rendered)
    meta = obj["metadata"]
    meta |= {
        "uid": f"uid-{rendered['kind']}-{meta['name']}",
        "resourceVersion": "42",
        "generation": 5,
        "creationTimestamp": NOW,
        "managedFields": [
            {
                "manager": manager,
                "operation": "Apply",
                "apiVersion": rendered["apiVersion"],
                "time": NOW,
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:metadata": {"f:labels": {".": {}}}, "f:spec": {".": {}}},
            }
        ],
    }
    if rendered["kind"] == "Service":
        obj["spec"] |= {"clusterIP": "10.0.0.7", "clusterIPs": ["10.0.0.7"]}
    if status is not None:
        obj["status"] = status
    return obj


STATUSES = [
    deployment(2, generation=5, observed=5)["status"],
    deployment(2, generation=5, observed=4)["status"],
    deployment(3, conditions=(DEADLINE,), availableReplicas=0, readyReplicas=1)["status"],
    {},
]


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda p: p.stem)
@pytest.mark.parametrize("status", STATUSES)
def test_status_and_rendering_are_the_same_from_a_cached_object(sample: Path, status: Obj) -> None:
    runtime = parsed(runtime_obj(sample))
    objects = {o["kind"]: o for o in render_managed_objects(runtime, None)}
    full_deployment = served(objects["Deployment"], status)
    full_service = served(objects["Service"])
    cached_deployment = FORMS["Deployment"](full_deployment)
    cached_service = FORMS["Service"](full_service)

    def status_from(deployment: Obj, service: Obj) -> Obj:
        return compute_status(
            runtime, deployment=deployment, service=service, outcome=Outcome(), now=NOW
        )

    assert status_from(cached_deployment, cached_service) == status_from(
        full_deployment, full_service
    )
    assert render_managed_objects(runtime, cached_deployment) == render_managed_objects(
        runtime, full_deployment
    )


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda p: p.stem)
def test_an_untouched_object_read_back_from_the_cache_is_not_applied_again(sample: Path) -> None:
    runtime = parsed(runtime_obj(sample))
    for rendered in render_managed_objects(runtime, None):
        form = FORMS[rendered["kind"]]
        answer = served(rendered, {"observedGeneration": 1})
        applied = AppliedObjects()
        applied.record(rendered, answer)
        assert applied.unchanged(rendered, form(answer | {"status": {"observedGeneration": 2}}))
        edited = copy.deepcopy(answer)
        field = next(k for k in edited if k not in ("apiVersion", "kind", "metadata", "status"))
        edited[field] = {"edited": "by hand"}
        assert not applied.unchanged(rendered, form(edited)), f"{rendered['kind']}.{field}"


def test_takeover_and_owner_mapping_read_the_same_from_a_cached_object() -> None:
    runtime = parsed(runtime_obj(SAMPLES[0]))
    for rendered in render_managed_objects(runtime, None):
        form = FORMS[rendered["kind"]]
        for manager in ("trussium-operator", *LEGACY_FIELD_MANAGERS):
            full = served(rendered, manager=manager)
            full["metadata"]["managedFields"][0]["operation"] = "Update"
            cached = form(full)
            assert needs_takeover(cached, LEGACY_FIELD_MANAGERS) == needs_takeover(
                full, LEGACY_FIELD_MANAGERS
            )
            assert owner_of(Change(None, cached)) == owner_of(Change(None, full)) != []


def test_a_settled_runtime_and_its_objects_take_under_20_kib_in_the_caches() -> None:
    """The minimal sample (what most runtimes look like) with the status it settles at."""
    count = 100
    # As the watch delivers them: text, parsed as it arrives.
    events: list[str] = []
    for i in range(count):
        obj = runtime_obj(MINIMAL, f"rt-{i:03d}")
        runtime = parsed(obj)
        objects = [served(r) for r in render_managed_objects(runtime, None)]
        live = {o["kind"]: o for o in objects}
        live["Deployment"]["status"] = deployment(1)["status"]
        obj["status"] = compute_status(
            runtime,
            deployment=live["Deployment"],
            service=live["Service"],
            outcome=Outcome(),
            now=NOW,
        )
        events += map(json.dumps, [obj, *objects])
    kinds = {json.loads(e)["kind"] for e in events}
    gc.collect()
    tracemalloc.start()
    try:
        stores = {kind: Store(FORMS[kind]) for kind in kinds - {"TrussiumRuntime"}}
        stores["TrussiumRuntime"] = Store(runtime_form)
        for event in events:
            obj = json.loads(event)
            stores[obj["kind"]].upsert(obj)
        del obj
        gc.collect()
        used = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert len(kinds) == 6, "the runtime and its five objects"
    assert used / count < 20 * 1024
