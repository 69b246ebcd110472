"""The kinds the controller manages, one entry each (docs/contract.md section 4).

Everything the controller does per kind is derived from `MANAGED_KINDS`: the
owned entries of the watch table and what their caches keep, the apply order,
each kind's apply step, which objects are deleted when their feature is off,
and the chart's controller RBAC is checked against it
(tests/apiserver/test_chart_controller_rbac.py). Adding a kind is an entry
here and its render function in `common/render.py` (ADR 0018).

The registry is passed in (`Manager`, `Reconciler`, `watch_table`), so a test
can manage a kind of its own without the product registry holding it.
"""

from collections.abc import Callable
from dataclasses import dataclass

from trussium_operator.common import constants as c
from trussium_operator.common.api import TrussiumRuntime
from trussium_operator.common.render import (
    Manifest,
    monitor_enabled,
    network_policy_enabled,
    render_autoscaler,
    render_config_map,
    render_deployment,
    render_network_policy,
    render_pod_disruption_budget,
    render_pod_monitor,
    render_service,
    render_service_account,
)
from trussium_operator.controller.compact import deployment_reads, service_reads
from trussium_operator.controller.machinery.cache import Obj
from trussium_operator.controller.machinery.kube import Resource
from trussium_operator.controller.steps import DEPLOYMENT_STEP, PLAIN, SERVICE_STEP, ApplyStep

# A kind's manifest from the runtime and the cached Deployment (which only the
# Deployment's own render reads: an autoscaler's replica count is kept).
Render = Callable[[TrussiumRuntime, Obj | None], Manifest]


def _always(runtime: TrussiumRuntime) -> bool:
    return True


@dataclass(frozen=True)
class ManagedKind:
    resource: Resource  # kind, apiVersion, plural
    render: Render
    # Off: the object must not exist, and one the runtime controls is deleted.
    enabled: Callable[[TrussiumRuntime], bool] = _always
    step: ApplyStep = PLAIN
    # What the cache keeps besides metadata and the fields digest (controller/compact.py).
    reads: Callable[[Obj], Obj] | None = None
    # Its API (a CRD) may be missing from the cluster: watched once it is served,
    # and never holding up cache sync, leadership or a reconcile meanwhile.
    optional: bool = False

    @property
    def kind(self) -> str:
        return self.resource.kind


def _runtime_only(render: Callable[[TrussiumRuntime], Manifest]) -> Render:
    return lambda runtime, cached_deployment: render(runtime)


def _autoscaler(runtime: TrussiumRuntime, cached_deployment: Obj | None) -> Manifest:
    settings = runtime.spec.enabled_autoscaling
    if settings is None:
        raise ValueError("an autoscaler is rendered only with autoscaling on")
    return render_autoscaler(runtime, settings)


def _autoscaled(runtime: TrussiumRuntime) -> bool:
    return runtime.spec.enabled_autoscaling is not None


def _resource(kind: str, plural: str) -> Resource:
    return Resource(c.MANAGED_API_VERSIONS[kind], kind, plural)


RUNTIMES = Resource(c.API_VERSION, c.KIND, c.PLURAL)
# In apply order: the ConfigMap first (pods mount it), the Deployment after what it uses.
MANAGED_KINDS: tuple[ManagedKind, ...] = (
    ManagedKind(_resource("ConfigMap", "configmaps"), _runtime_only(render_config_map)),
    ManagedKind(
        _resource("ServiceAccount", "serviceaccounts"), _runtime_only(render_service_account)
    ),
    ManagedKind(
        _resource("Service", "services"),
        _runtime_only(render_service),
        step=SERVICE_STEP,
        reads=service_reads,
    ),
    ManagedKind(
        _resource("Deployment", "deployments"),
        render_deployment,
        step=DEPLOYMENT_STEP,
        reads=deployment_reads,
    ),
    ManagedKind(
        _resource("PodDisruptionBudget", "poddisruptionbudgets"),
        _runtime_only(render_pod_disruption_budget),
    ),
    ManagedKind(
        _resource("NetworkPolicy", "networkpolicies"),
        _runtime_only(render_network_policy),
        enabled=lambda runtime: network_policy_enabled(runtime.spec),
    ),
    ManagedKind(
        _resource("HorizontalPodAutoscaler", "horizontalpodautoscalers"),
        _autoscaler,
        enabled=_autoscaled,
    ),
    # prometheus-operator's CRD: absent from many clusters, installed at any time (ADR 0047).
    ManagedKind(
        _resource("PodMonitor", "podmonitors"),
        _runtime_only(render_pod_monitor),
        enabled=lambda runtime: monitor_enabled(runtime.spec),
        optional=True,
    ),
)
OWNED = {kind.kind: kind.resource for kind in MANAGED_KINDS}


def render_managed_objects(
    runtime: TrussiumRuntime,
    cached_deployment: Obj | None = None,
    kinds: tuple[ManagedKind, ...] = MANAGED_KINDS,
) -> list[Manifest]:
    """Every object to apply, in apply order."""
    return [kind.render(runtime, cached_deployment) for kind in kinds if kind.enabled(runtime)]


def disabled_kinds(
    runtime: TrussiumRuntime, kinds: tuple[ManagedKind, ...] = MANAGED_KINDS
) -> list[ManagedKind]:
    """The kinds whose object must not exist for this runtime (its feature is off)."""
    return [kind for kind in kinds if not kind.enabled(runtime)]
