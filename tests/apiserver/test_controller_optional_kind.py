"""An optional managed kind whose CRD is not installed holds up neither cache sync,
readiness nor leadership, and is managed as soon as its CRD appears (ADR 0018).

The kind is the test's own (`Gadget`, in a group no other test uses), handed to
an in-process controller with the product registry (`Manager(..., kinds)`), so
the product registry holds no fake kind.
"""

import asyncio
import json
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from devcluster import ControlPlane
from devcluster.controller_harness import apply, runtime_manifest
from devcluster.hostoperator import install_crds
from trussium_operator.cmdline.kubeconfig import new_api_client
from trussium_operator.common.images import render_image
from trussium_operator.common.render import RenderContext, render_config_map
from trussium_operator.controller.machinery.cache import Obj
from trussium_operator.controller.machinery.kube import ApiError, Kube, Resource
from trussium_operator.controller.manager import Manager, Options
from trussium_operator.controller.runtime.kinds import MANAGED_KINDS, OWNED, ManagedKind
from trussium_operator.serving.secure_metrics import MetricsOptions

pytestmark = pytest.mark.api


def gadget_crd(resource: Resource) -> Obj:
    group, _, version = resource.api_version.partition("/")
    schema = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{resource.plural}.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"kind": resource.kind, "plural": resource.plural, "singular": "gadget"},
            "versions": [
                {
                    "name": version,
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": schema},
                }
            ],
        },
    }


def gadget_kind(resource: Resource) -> ManagedKind:
    def render(context: RenderContext) -> Obj:
        metadata = render_config_map(context)["metadata"]  # the operator's labels and owner
        spec = {"image": render_image(context.runtime.spec.image)}
        return {
            "kind": resource.kind,
            "metadata": metadata,
            "spec": spec,
        }

    return ManagedKind(resource, render, optional=True)


async def until(check: Callable[[], Awaitable[Any]], what: str, seconds: float = 60.0) -> Any:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if found := await check():
            return found
        await asyncio.sleep(0.2)
    pytest.fail(f"timed out after {seconds:.0f}s waiting for {what}")


async def test_an_optional_kind_is_managed_once_its_crd_appears(
    plane: ControlPlane, namespace: str
) -> None:
    install_crds(plane)
    gadgets = Resource(f"t{secrets.token_hex(4)}.optional.trussium.io/v1", "Gadget", "gadgets")
    kube = Kube(await new_api_client(str(plane.kubeconfig)))

    async def read(resource: Resource) -> Obj | None:
        try:
            return await kube.request("GET", resource.path(namespace, "demo"))
        except ApiError as error:
            if error.not_found:
                return None
            raise

    options = Options(
        watch_namespace=namespace,
        leader_election_namespace=namespace,
        leader_election_id="optional-kind",
        identity="optional-kind-test",
        health_address="0",
        metrics=MetricsOptions("0"),
        exclusion_lease=None,
    )
    manager = Manager(kube, options, (*MANAGED_KINDS, gadget_kind(gadgets)))
    stop = asyncio.Event()
    running = asyncio.create_task(manager.run(stop))
    crd = gadget_crd(gadgets)
    try:
        await asyncio.to_thread(apply, plane, runtime_manifest("demo", namespace))
        # Synced, leading and reconciling without the Gadget API.
        await until(lambda: read(OWNED["ConfigMap"]), "the runtime's ConfigMap")
        assert manager.ready()
        assert not manager.caches.owned("Gadget").served

        await asyncio.to_thread(
            plane.kubectl, "apply", "--server-side", "-f", "-", input=json.dumps(crd)
        )
        gadget = await until(lambda: read(gadgets), "the runtime's Gadget, once its CRD is served")
        assert gadget["spec"]["image"].endswith(":1.0.0")
        assert [o["name"] for o in gadget["metadata"]["ownerReferences"]] == ["demo"]
        assert manager.caches.owned("Gadget").served
        assert manager.ready()
    finally:
        stop.set()
        assert await asyncio.wait_for(running, 60) == 0
        await kube.api.close()
        await asyncio.to_thread(
            plane.kubectl, "delete", "crd", crd["metadata"]["name"], "--wait=false", check=False
        )
