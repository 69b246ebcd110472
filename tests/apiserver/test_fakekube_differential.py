"""The in-memory API server (tests/support/fakekube.py) answers as the real one does, for
what the controller relies on: the same requests, sent to both, get the same status
codes, object contents and field ownership. The in-process controller tests are only
as good as this."""

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from kubernetes_asyncio import client

from tests.support.fakekube import FakeKube
from trussium_operator.cmdline.metadata_only import METADATA_ONLY
from trussium_operator.controller.machinery.kube import APPLY_PATCH, JSON_PATCH, ApiError, Kube

pytestmark = pytest.mark.api
Obj = dict[str, Any]


def configmap(namespace: str, data: dict[str, str], **metadata: Any) -> Obj:
    meta = {"name": "cm", "namespace": namespace} | metadata
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}


def ownership(obj: Obj) -> list[tuple[str, str, Obj]]:
    """(manager, operation, fields) without the "." markers the fake does not keep."""

    def bare(fields: Obj) -> Obj:
        return {k: bare(v) for k, v in fields.items() if k != "."}

    entries = obj["metadata"].get("managedFields") or []
    return sorted((e["manager"], e["operation"], bare(e["fieldsV1"])) for e in entries)


async def outcome(call: Callable[[], Awaitable[Obj]], *keep: str) -> Any:
    """What a user of the answer sees: the error status and reason, or the kept parts."""
    try:
        answer = await call()
    except ApiError as error:
        return error.status, error.reason
    shown: dict[str, Any] = {}
    for key in keep:
        if key == "ownership":
            shown[key] = ownership(answer)
        elif key == "labels":
            shown[key] = answer["metadata"].get("labels")
        elif key == "items":
            shown[key] = [(i.get("kind"), i["metadata"]["name"]) for i in answer["items"]]
        elif key == "continue":
            shown[key] = bool(answer["metadata"].get("continue"))
        else:
            shown[key] = answer.get(key)
    return shown


async def scenario(kube: Kube, namespace: str) -> list[Any]:
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    events = f"/apis/events.k8s.io/v1/namespaces/{namespace}/events"
    leases = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
    seen: list[Any] = []

    def apply(obj: Obj, manager: str, force: bool = True) -> Callable[[], Awaitable[Obj]]:
        query = {"fieldManager": manager} | ({"force": "true"} if force else {})
        return lambda: kube.request(
            "PATCH", f"{path}/cm", query=query, body=obj, content_type=APPLY_PATCH
        )

    def patch(ops: list[Obj], manager: str) -> Callable[[], Awaitable[Obj]]:
        return lambda: kube.request(
            "PATCH",
            f"{path}/cm",
            query={"fieldManager": manager},
            body=ops,
            content_type=JSON_PATCH,
        )

    first = configmap(namespace, {"x": "1", "y": "2"}, labels={"app": "a"})
    seen.append(await outcome(apply(first, "a"), "data", "labels", "ownership"))
    add = [{"op": "add", "path": "/data/z", "value": "3"}]
    seen.append(await outcome(patch(add, "b"), "data", "ownership"))
    # "a" stops setting y and the label: they go; z belongs to "b" and stays.
    seen.append(await outcome(apply(configmap(namespace, {"x": "2"}), "a"), "data", "labels"))
    live = await kube.request("GET", f"{path}/cm")
    seen.append(ownership(live))
    stale = configmap(namespace, {"x": "2"}, resourceVersion="1")
    seen.append(await outcome(apply(stale, "a"), "data"))
    # "c" sets a field "a" owns with another value: a conflict, unless forced.
    seen.append(await outcome(apply(configmap(namespace, {"x": "5"}), "c", force=False), "data"))
    seen.append(await outcome(apply(configmap(namespace, {"x": "5"}), "c"), "data", "ownership"))
    # The same value as another manager's: shared, no conflict.
    seen.append(await outcome(apply(configmap(namespace, {"z": "3"}), "d", force=False), "data"))
    version = (await kube.request("GET", f"{path}/cm"))["metadata"]["resourceVersion"]
    guarded = [
        {"op": "test", "path": "/metadata/resourceVersion", "value": version},
        {"op": "remove", "path": "/data/z"},
    ]
    seen.append(await outcome(patch(guarded, "e"), "data", "ownership"))
    seen.append(await outcome(patch(guarded, "e"), "data"))  # the version moved: 422
    missing = [{"op": "test", "path": "/data/nothing", "value": "1"}]
    seen.append(await outcome(patch(missing, "e"), "data"))

    other = configmap(namespace, {"k": "v"}, name="other", labels={"app": "b"})
    seen.append(await outcome(lambda: kube.request("POST", path, body=other), "data"))
    seen.append(await outcome(lambda: kube.request("POST", path, body=other), "data"))
    selected = {"labelSelector": "app=b"}
    seen.append(await outcome(lambda: kube.request("GET", path, query=selected), "items"))
    first_page = {"limit": 1}
    page = await kube.request("GET", path, query=first_page, accept=METADATA_ONLY)
    seen.append(await outcome(lambda: _same(page), "items", "continue"))
    rest = {"limit": 1, "continue": page["metadata"]["continue"]}
    seen.append(
        await outcome(
            lambda: kube.request("GET", path, query=rest, accept=METADATA_ONLY), "items", "continue"
        )
    )
    seen.append(await outcome(lambda: kube.request("GET", f"{path}/missing"), "data"))
    for precondition in ({"uid": "not-the-uid"}, {"resourceVersion": "1"}):
        body = {"preconditions": precondition}
        seen.append(await outcome(lambda b=body: kube.request("DELETE", f"{path}/cm", body=b)))  # type: ignore[misc]

    event = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": "cm.1", "namespace": namespace},
        "eventTime": "2026-01-01T00:00:00.000000Z",
        "reportingController": "trussium-operator",
        "reportingInstance": "test",
        "action": "Reconcile",
        "reason": "RuntimeReady",
        "type": "Normal",
        "note": "ready",
        "regarding": {"kind": "ConfigMap", "name": "cm", "namespace": namespace},
    }
    for _ in range(2):
        seen.append(await outcome(lambda: kube.request("POST", events, body=event), "reason"))

    lease = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "lock", "namespace": namespace},
        "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15},
    }
    created = await kube.request("POST", leases, body=lease)
    seen += await generations(kube, namespace)
    renewed = created | {"spec": created["spec"] | {"holderIdentity": "b"}}
    seen.append(await outcome(lambda: kube.request("PUT", f"{leases}/lock", body=renewed), "spec"))
    seen.append(await outcome(lambda: kube.request("PUT", f"{leases}/lock", body=renewed), "spec"))
    return seen


async def generations(kube: Kube, namespace: str) -> list[Any]:
    """metadata.generation moves with the spec only; a stale status write is refused."""
    path = f"/apis/apps/v1/namespaces/{namespace}/deployments/web"
    pod = {"containers": [{"name": "web", "image": "web:1"}]}
    labels = {"app": "web"}
    deployment: Obj = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": namespace},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": pod},
        },
    }
    query = {"fieldManager": "a", "force": "true"}
    seen: list[Any] = []
    relabelled = deployment | {"metadata": deployment["metadata"] | {"labels": labels}}
    scaled = relabelled | {"spec": relabelled["spec"] | {"replicas": 2}}
    for body in (deployment, relabelled, scaled):
        answer = await kube.request("PATCH", path, query=query, body=body, content_type=APPLY_PATCH)
        seen.append(answer["metadata"]["generation"])
    status = {"status": {"observedGeneration": 2, "replicas": 2}}
    answer = await kube.request(
        "PATCH", f"{path}/status", body=status, content_type="application/merge-patch+json"
    )
    seen.append((answer["metadata"]["generation"], answer["status"].get("replicas")))
    stale = answer | {"metadata": answer["metadata"] | {"resourceVersion": "1"}}
    seen.append(await outcome(lambda: kube.request("PUT", f"{path}/status", body=stale)))
    return seen


async def _same(obj: Obj) -> Obj:
    return obj


async def test_the_fake_answers_as_the_api_server_does(
    api_client: client.ApiClient, namespace: str
) -> None:
    real = await scenario(Kube(api_client), namespace)
    fake = await scenario(FakeKube(), namespace)
    for step, (theirs, ours) in enumerate(zip(real, fake, strict=True)):
        assert ours == theirs, f"step {step}"
