"""How a managed kind is applied: a forced server-side apply, plus what one kind
needs before, instead of, or after it (each kind's step is in its registry entry,
`controller/runtime/kinds.py`).

- Deployment: with autoscaling on, the apply is guarded by the cached
  resourceVersion (its replica count was read from there), so a count the
  autoscaler set meanwhile is never overwritten: a 409, and a fresh retry.
  After the apply, pod-template fields other managers added are removed
  (`controller/runtime/drift.py`).
- Service: an apply refused as invalid because a hand-edited port sits beside
  ours under another manager (a duplicate `http` name) is recovered by a JSON
  patch swapping their ports for ours, then applied again.
"""

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from trussium_operator.common import constants as c
from trussium_operator.common.api import TrussiumRuntime
from trussium_operator.controller.machinery.cache import Obj
from trussium_operator.controller.machinery.kube import (
    APPLY_PATCH,
    JSON_PATCH,
    ApiError,
    Kube,
    Resource,
)
from trussium_operator.controller.runtime.drift import (
    POD_TEMPLATE,
    foreign_removals,
    service_ports_restoration,
)

log = logging.getLogger("controller.runtime.reconciler")  # a step's lines are its reconcile's


async def server_side_apply(kube: Kube, resource: Resource, body: Obj) -> Obj:
    meta = body["metadata"]
    return await kube.request(
        "PATCH",
        resource.path(meta["namespace"], meta["name"]),
        query={"fieldManager": c.FIELD_MANAGER, "force": "true"},
        body=body,
        content_type=APPLY_PATCH,
    )


def _as_rendered(runtime: TrussiumRuntime, rendered: Obj, live: Obj | None) -> Obj:
    return rendered


async def _no_recovery(kube: Kube, resource: Resource, error: ApiError, rendered: Obj) -> bool:
    return False


async def _as_answered(kube: Kube, resource: Resource, answer: Obj) -> Obj:
    return answer


@dataclass(frozen=True)
class ApplyStep:
    """`body` is what to apply; `recover` fixes what a refused apply ran into (True:
    apply again); `settle` follows a successful apply and returns the object as it is."""

    body: Callable[[TrussiumRuntime, Obj, Obj | None], Obj] = _as_rendered
    recover: Callable[[Kube, Resource, ApiError, Obj], Awaitable[bool]] = _no_recovery
    settle: Callable[[Kube, Resource, Obj], Awaitable[Obj]] = _as_answered

    async def apply(
        self,
        kube: Kube,
        resource: Resource,
        runtime: TrussiumRuntime,
        rendered: Obj,
        live: Obj | None,
    ) -> Obj:
        body = self.body(runtime, rendered, live)
        try:
            answer = await server_side_apply(kube, resource, body)
        except ApiError as error:
            if not await self.recover(kube, resource, error, rendered):
                raise
            answer = await server_side_apply(kube, resource, body)
        return await self.settle(kube, resource, answer)


def _guarded_by_cached_version(runtime: TrussiumRuntime, rendered: Obj, live: Obj | None) -> Obj:
    if live is None or runtime.spec.enabled_autoscaling is None:
        return rendered
    version = live["metadata"]["resourceVersion"]
    return rendered | {"metadata": rendered["metadata"] | {"resourceVersion": version}}


async def _remove_foreign_pod_template_fields(kube: Kube, resource: Resource, obj: Obj) -> Obj:
    patch = foreign_removals(obj, c.FIELD_MANAGER, POD_TEMPLATE)
    if not patch:
        return obj
    meta = obj["metadata"]
    log.info(
        "removing fields others added to %s",
        ".".join(POD_TEMPLATE),
        extra={
            "fields": {
                "namespace": meta["namespace"],
                "name": meta["name"],
                "paths": [op["path"] for op in patch if op["op"] == "remove"],
            }
        },
    )
    path = resource.path(meta["namespace"], meta["name"])
    return await kube.request("PATCH", path, body=patch, content_type=JSON_PATCH)


async def _restore_service_ports(
    kube: Kube, resource: Resource, error: ApiError, rendered: Obj
) -> bool:
    if not error.invalid:
        return False
    meta = rendered["metadata"]
    path = resource.path(meta["namespace"], meta["name"])
    service = await kube.request("GET", path)
    patch = service_ports_restoration(service, c.FIELD_MANAGER, rendered["spec"]["ports"])
    if not patch:
        return False
    log.info(
        "restoring Service ports others changed",
        extra={"fields": {"namespace": meta["namespace"], "name": meta["name"]}},
    )
    await kube.request("PATCH", path, body=patch, content_type=JSON_PATCH)
    return True


PLAIN = ApplyStep()
DEPLOYMENT_STEP = ApplyStep(
    body=_guarded_by_cached_version, settle=_remove_foreign_pod_template_fields
)
SERVICE_STEP = ApplyStep(recover=_restore_service_ports)
