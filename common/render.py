"""The objects the operator owns for a TrussiumRuntime (docs/contract.md section 4).

Each manifest holds only the fields the operator owns, so server-side apply
neither fights Kubernetes' defaults nor other field managers. Which kinds are
rendered, in which order and when, is the controller's registry of managed
kinds (`controller/runtime/kinds.py`).
"""

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from trussium_operator.common import constants as c
from trussium_operator.common.api import (
    AutoscalingSpec,
    NetworkPolicyIngressPeer,
    ObservabilitySpec,
    ReadinessSpec,
    RuntimeTuning,
    SecretKeyReference,
    TracingSpec,
    TrussiumRuntime,
    TrussiumRuntimeSpec,
)
from trussium_operator.common.images import render_image
from trussium_operator.common.lifecycle import desired_replicas
from trussium_operator.common.quantity import QuantityError, parse_quantity
from trussium_operator.common.references import credential_secret_names

Manifest = dict[str, Any]
# A referenced Secret's name -> "<uid>/<resourceVersion>", as the controller's
# metadata-only Secret watch last saw it: the Secret's identity and version, never its data.
SecretVersions = Mapping[str, str]


@dataclass(frozen=True)
class RenderContext:
    """What every managed object is rendered from: the runtime, and what the controller
    observed that a render keeps: the cached Deployment (its replica count, while an
    autoscaler owns it) and the referenced Secrets' versions (`rollOnSecretChange`).
    An offline render knows neither."""

    runtime: TrussiumRuntime
    cached_deployment: Mapping[str, Any] | None = None
    secret_versions: SecretVersions = field(default_factory=dict)


def _dump(model: BaseModel) -> dict[str, Any]:
    return model.model_dump(by_alias=True, exclude_none=True, mode="json")


def operator_labels(name: str) -> dict[str, str]:
    return {
        c.LABEL_NAME: c.APP_NAME,
        c.LABEL_INSTANCE: name,
        c.LABEL_COMPONENT: c.COMPONENT,
        c.LABEL_MANAGED_BY: c.MANAGED_BY,
    }


def selector_labels(name: str) -> dict[str, str]:
    return {c.LABEL_NAME: c.APP_NAME, c.LABEL_INSTANCE: name}


def _owner_reference(runtime: TrussiumRuntime) -> dict[str, Any]:
    """The controller reference that lets garbage collection delete the object.

    The uid is left out when unknown (a manifest rendered offline, before the
    runtime exists); the API server requires it, the controller always has it.
    """
    reference: dict[str, Any] = {
        "apiVersion": c.API_VERSION,
        "kind": c.KIND,
        "name": runtime.metadata.name,
    }
    if runtime.metadata.uid:
        reference["uid"] = runtime.metadata.uid
    return reference | {"controller": True, "blockOwnerDeletion": True}


def _object(runtime: TrussiumRuntime, kind: str, **body: Any) -> Manifest:
    """A managed object but its apiVersion, which its kind's registry entry adds
    (controller/runtime/kinds.py)."""
    return {
        "kind": kind,
        "metadata": {
            "name": runtime.metadata.name,
            "namespace": runtime.metadata.namespace,
            "labels": operator_labels(runtime.metadata.name),
            "ownerReferences": [_owner_reference(runtime)],
        },
        **body,
    }


def config_data(spec: TrussiumRuntimeSpec) -> dict[str, str]:
    """The runtime's environment as projected into its ConfigMap."""
    data = {
        c.ENV_ENVIRONMENT: c.CONFIG_ENVIRONMENT,
        c.ENV_HOST: c.CONFIG_HOST,
        c.ENV_PORT: str(c.CONTAINER_PORT),
        c.ENV_PROVIDER_NAME: spec.provider.type,
    }
    if spec.provider.base_url is not None:
        data[c.ENV_PROVIDER_BASE_URL] = spec.provider.base_url
    tuning = spec.runtime
    if tuning is not None:
        optional = {
            c.ENV_PROVIDER_REQUEST_TIMEOUT: tuning.provider_request_timeout_seconds,
            c.ENV_STREAM_IDLE_TIMEOUT: tuning.stream_idle_timeout_seconds,
            c.ENV_GRACEFUL_SHUTDOWN: tuning.shutdown_drain_timeout_seconds,
        }
        data.update({key: str(value) for key, value in optional.items() if value is not None})
    data.update(
        {key: _setting(value) for key, value in _settings(spec).items() if value is not None}
    )
    return data


def _settings(spec: TrussiumRuntimeSpec) -> dict[str, bool | float | str | None]:
    """The runtime's own settings (ADR 0035) by environment name; None where the spec
    leaves the runtime's default. A dependency check needs a model to ask the provider
    for: provider.model unless the spec names another."""
    tuning = spec.runtime or RuntimeTuning()
    readiness = spec.readiness or ReadinessSpec()
    observability = spec.observability or ObservabilitySpec()
    tracing = observability.tracing or TracingSpec()
    required_model = readiness.required_model
    if required_model is None and readiness.dependency_checks:
        required_model = spec.provider.model
    return {
        c.ENV_SERVICE_CLEANUP: tuning.service_cleanup_timeout_seconds,
        c.ENV_COMPONENT_HEALTH_TIMEOUT: tuning.component_health_timeout_seconds,
        c.ENV_CAPABILITY_AVAILABILITY_TIMEOUT: tuning.capability_availability_timeout_seconds,
        c.ENV_CAPABILITY_HEALTH_TIMEOUT: tuning.capability_health_timeout_seconds,
        c.ENV_DEPENDENCY_CHECKS: readiness.dependency_checks,
        c.ENV_DEPENDENCY_TIMEOUT: readiness.dependency_timeout_seconds,
        c.ENV_DEPENDENCY_CACHE: readiness.dependency_cache_seconds,
        c.ENV_REQUIRED_MODEL: required_model,
        c.ENV_RERANKING_BASE_URL: spec.reranking.base_url if spec.reranking else None,
        c.ENV_METRICS: observability.metrics,
        c.ENV_TRACING: tracing.enabled,
        c.ENV_TRACING_SERVICE_NAME: tracing.service_name,
        c.ENV_TRACING_SAMPLE_RATIO: tracing.sample_ratio,
        c.ENV_OTLP_ENDPOINT: tracing.otlp_endpoint,
        c.ENV_OTLP_EXPORT_TIMEOUT: tracing.export_timeout_seconds,
    }


def _setting(value: bool | float | str) -> str:
    """A value as the runtime's settings parse it: `true`/`false`; a whole number of
    seconds without a fraction (`10`, not `10.0`); other numbers in Python's shortest
    exact form (`0.25`)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else repr(value)
    return value


def config_checksum(data: Mapping[str, str]) -> str:
    """SHA-256 of the length-prefixed data, byte-identical to the Go operator's.

    Length prefixes make the encoding unambiguous; keys are sorted by their
    UTF-8 bytes so insertion order never changes the result.
    """
    encoded = [(key.encode(), value.encode()) for key, value in data.items()]
    digest = hashlib.sha256()
    for key, value in sorted(encoded):
        digest.update(b"%d:%b:%d:%b;" % (len(key), key, len(value), value))
    return digest.hexdigest()


def render_config_map(context: RenderContext) -> Manifest:
    runtime = context.runtime
    return _object(runtime, "ConfigMap", data=config_data(runtime.spec))


def _pull_secrets(spec: TrussiumRuntimeSpec) -> dict[str, Any]:
    refs = [{"name": ref.name} for ref in spec.image_pull_secrets or ()]
    return {"imagePullSecrets": refs} if refs else {}


def render_service_account(context: RenderContext) -> Manifest:
    runtime = context.runtime
    return _object(
        runtime,
        "ServiceAccount",
        automountServiceAccountToken=False,
        **_pull_secrets(runtime.spec),
    )


def render_service(context: RenderContext) -> Manifest:
    runtime = context.runtime
    service = runtime.spec.service
    port = {
        "name": c.PORT_NAME,
        "protocol": "TCP",
        "port": service.port,
        "targetPort": c.PORT_NAME,
    }
    spec: dict[str, Any] = {
        "type": service.type,
        "selector": selector_labels(runtime.metadata.name),
        "ports": [port],
    }
    if service.load_balancer_source_ranges is not None:
        spec["loadBalancerSourceRanges"] = list(service.load_balancer_source_ranges)
    if service.external_traffic_policy is not None:
        spec["externalTrafficPolicy"] = service.external_traffic_policy
    manifest = _object(runtime, "Service", spec=spec)
    if service.annotations:
        manifest["metadata"]["annotations"] = dict(service.annotations)
    return manifest


def _probe(path: str, timing: tuple[int, int, int]) -> dict[str, Any]:
    period, timeout, failure_threshold = timing
    return {
        "httpGet": {"path": path, "port": c.PORT_NAME},
        "periodSeconds": period,
        "timeoutSeconds": timeout,
        "failureThreshold": failure_threshold,
    }


def scratch_size_limit(spec: TrussiumRuntimeSpec) -> int | str:
    """The spec's size, else the default capped at the container's ephemeral-storage
    limit: the scratch space counts in that limit, so it can never hold more."""
    if spec.scratch is not None and spec.scratch.size_limit is not None:
        return spec.scratch.size_limit
    limit = ((spec.resources.limits if spec.resources else None) or {}).get(c.EPHEMERAL_STORAGE)
    if limit is None:
        return c.SCRATCH_DEFAULT_SIZE
    try:
        lower = parse_quantity(limit) < parse_quantity(c.SCRATCH_DEFAULT_SIZE)
    except QuantityError:  # validation reports it
        return c.SCRATCH_DEFAULT_SIZE
    return limit if lower else c.SCRATCH_DEFAULT_SIZE


def _scratch(spec: TrussiumRuntimeSpec) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """The scratch space (docs/contract.md section 12): the Pod's emptyDir, the
    container's mount of it and TMPDIR naming it, where the runtime spools large
    request bodies under a read-only root filesystem."""
    volume = {"name": c.SCRATCH_VOLUME, "emptyDir": {"sizeLimit": scratch_size_limit(spec)}}
    mount = {"name": c.SCRATCH_VOLUME, "mountPath": c.SCRATCH_PATH}
    return volume, mount, {"name": c.SCRATCH_ENV, "value": c.SCRATCH_PATH}


def _secret_env(name: str, ref: SecretKeyReference | None) -> list[dict[str, Any]]:
    """A credential reaches the runtime only from its Secret, never through the ConfigMap."""
    if ref is None:
        return []
    return [{"name": name, "valueFrom": {"secretKeyRef": {"name": ref.name, "key": ref.key}}}]


def _container(spec: TrussiumRuntimeSpec, name: str) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": c.CONTAINER_NAME,
        "image": render_image(spec.image),
        "imagePullPolicy": spec.image.pull_policy,
        "ports": [{"name": c.PORT_NAME, "containerPort": c.CONTAINER_PORT, "protocol": "TCP"}],
        "envFrom": [{"configMapRef": {"name": name}}],
    }
    _, scratch_mount, scratch_env = _scratch(spec)
    reranking = spec.reranking.credentials_secret_ref if spec.reranking else None
    container["env"] = [
        *_secret_env(c.API_KEY_ENV, spec.provider.credentials_secret_ref),
        *_secret_env(c.RERANKING_API_KEY_ENV, reranking),
        scratch_env,
    ]
    if spec.resources is not None:
        container["resources"] = _dump(spec.resources)
    container["volumeMounts"] = [scratch_mount]
    container["securityContext"] = {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    container["startupProbe"] = _probe(c.LIVE_PATH, c.STARTUP_PROBE_TIMING)
    container["livenessProbe"] = _probe(c.LIVE_PATH, c.LIVENESS_PROBE_TIMING)
    container["readinessProbe"] = _probe(c.READY_PATH, c.READINESS_PROBE_TIMING)
    return container


def _termination_grace_seconds(spec: TrussiumRuntimeSpec) -> int:
    drain = spec.runtime.shutdown_drain_timeout_seconds if spec.runtime else None
    return (drain or c.DEFAULT_SHUTDOWN_DRAIN_SECONDS) + c.TERMINATION_GRACE_MARGIN_SECONDS


def secret_versions_annotation(
    spec: TrussiumRuntimeSpec, versions: SecretVersions
) -> dict[str, str]:
    """With rollOnSecretChange, the credentials Secrets' versions in the Pod template:
    an update of one changes the template, so the Deployment rolls its Pods once.
    Empty when off, or when no version is known (an offline render)."""
    if not spec.roll_on_secret_change:
        return {}
    names = credential_secret_names(spec)
    known = [f"{name}={versions[name]}" for name in names if name in versions]
    return {c.SECRET_VERSIONS_ANNOTATION: ",".join(known)} if known else {}


def _pod_template(
    runtime: TrussiumRuntime, checksum: str, secret_versions: SecretVersions
) -> dict[str, Any]:
    name = runtime.metadata.name
    spec = runtime.spec
    pod_metadata = spec.pod_metadata
    user_labels = (pod_metadata.labels if pod_metadata else None) or {}
    user_annotations = (pod_metadata.annotations if pod_metadata else None) or {}
    labels = {k: v for k, v in user_labels.items() if k not in c.OPERATOR_LABEL_KEYS}
    labels.update(operator_labels(name))
    annotations = {
        **user_annotations,
        c.CONFIG_CHECKSUM_ANNOTATION: checksum,
        **secret_versions_annotation(spec, secret_versions),
    }
    pod: dict[str, Any] = {
        "serviceAccountName": name,
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "terminationGracePeriodSeconds": _termination_grace_seconds(spec),
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": c.RUNTIME_UID,
            "runAsGroup": c.RUNTIME_GID,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        **_pull_secrets(spec),
    }
    scheduling = spec.scheduling
    if scheduling is not None:
        if scheduling.node_selector:
            pod["nodeSelector"] = dict(scheduling.node_selector)
        if scheduling.tolerations:
            pod["tolerations"] = [_dump(t) for t in scheduling.tolerations]
        if scheduling.affinity is not None:
            pod["affinity"] = _dump(scheduling.affinity)
    pod["topologySpreadConstraints"] = [
        {
            "maxSkew": 1,
            "topologyKey": c.TOPOLOGY_KEY,
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": selector_labels(name)},
        }
    ]
    pod["containers"] = [_container(spec, name)]
    pod["volumes"] = [_scratch(spec)[0]]
    return {"metadata": {"labels": labels, "annotations": annotations}, "spec": pod}


def render_deployment(context: RenderContext) -> Manifest:
    """The workload; with autoscaling on, the live replica count is kept as the HPA set it."""
    runtime = context.runtime
    checksum = config_checksum(config_data(runtime.spec))
    spec = {
        "replicas": desired_replicas(runtime.spec, context.cached_deployment),
        "selector": {"matchLabels": selector_labels(runtime.metadata.name)},
        "strategy": {
            "type": "RollingUpdate",
            "rollingUpdate": {"maxUnavailable": c.MAX_UNAVAILABLE, "maxSurge": c.MAX_SURGE},
        },
        "progressDeadlineSeconds": c.PROGRESS_DEADLINE_SECONDS,
        "revisionHistoryLimit": c.REVISION_HISTORY_LIMIT,
        "template": _pod_template(runtime, checksum, context.secret_versions),
    }
    return _object(runtime, "Deployment", spec=spec)


def render_pod_disruption_budget(context: RenderContext) -> Manifest:
    """At most one pod down by eviction; a pod that is not Ready may always be evicted,
    so a runtime that never becomes Ready cannot hold up a node drain."""
    runtime = context.runtime
    spec = {
        "maxUnavailable": c.PDB_MAX_UNAVAILABLE,
        "selector": {"matchLabels": selector_labels(runtime.metadata.name)},
        "unhealthyPodEvictionPolicy": c.PDB_UNHEALTHY_POD_EVICTION_POLICY,
    }
    return _object(runtime, "PodDisruptionBudget", spec=spec)


def _peer(peer: NetworkPolicyIngressPeer) -> dict[str, Any]:
    source = {"namespaceSelector": _dump(peer.namespace_selector)}
    if peer.pod_selector is not None:
        source["podSelector"] = _dump(peer.pod_selector)
    return source


def _rule(sources: list[dict[str, Any]]) -> dict[str, Any]:
    return {"from": sources, "ports": [{"protocol": "TCP", "port": c.CONTAINER_PORT}]}


def render_network_policy(context: RenderContext) -> Manifest:
    runtime = context.runtime
    policy = runtime.spec.network_policy
    rules = []
    for peer in (policy.ingress if policy else None) or ():
        rules.append(_rule([_peer(peer)]))
    # The scrapers: the runtime serves /metrics on its one port, so that port alone.
    scrapers = [_peer(peer) for peer in (policy.scrapers if policy else None) or ()]
    if scrapers:
        rules.append(_rule(scrapers))
    spec = {
        "podSelector": {"matchLabels": selector_labels(runtime.metadata.name)},
        "policyTypes": ["Ingress"],
        "ingress": rules,
    }
    return _object(runtime, "NetworkPolicy", spec=spec)


def _autoscaler_metrics(autoscaling: AutoscalingSpec) -> list[dict[str, Any]]:
    """CPU always; in-flight requests per Pod too when set, and the HPA then follows
    whichever metric asks for more replicas (ADR 0046)."""
    cpu_target = {
        "type": "Utilization",
        "averageUtilization": autoscaling.target_cpu_utilization_percentage,
    }
    metrics: list[dict[str, Any]] = [
        {"type": "Resource", "resource": {"name": "cpu", "target": cpu_target}}
    ]
    in_flight = autoscaling.in_flight_requests
    if in_flight is not None:
        pods = {
            "metric": {"name": in_flight.metric_name},
            "target": {"type": "AverageValue", "averageValue": str(in_flight.target_per_pod)},
        }
        metrics.append({"type": "Pods", "pods": pods})
    return metrics


def render_autoscaler(context: RenderContext) -> Manifest:
    runtime = context.runtime
    autoscaling = runtime.spec.enabled_autoscaling
    if autoscaling is None:
        raise ValueError("an autoscaler is rendered only with autoscaling on")
    spec: dict[str, Any] = {
        "scaleTargetRef": {
            "apiVersion": c.DEPLOYMENT_API_VERSION,
            "kind": "Deployment",
            "name": runtime.metadata.name,
        },
        "minReplicas": autoscaling.min_replicas,
        "maxReplicas": autoscaling.max_replicas,
        "metrics": _autoscaler_metrics(autoscaling),
    }
    if autoscaling.behavior is not None:
        spec["behavior"] = _dump(autoscaling.behavior)
    return _object(runtime, "HorizontalPodAutoscaler", spec=spec)


def network_policy_enabled(spec: TrussiumRuntimeSpec) -> bool:
    return spec.network_policy is not None and spec.network_policy.enabled


def monitor_enabled(spec: TrussiumRuntimeSpec) -> bool:
    monitor = spec.observability.monitor if spec.observability else None
    return monitor is not None and monitor.enabled


def render_pod_monitor(context: RenderContext) -> Manifest:
    """Scrapes each runtime Pod on its named port, labelling the series with the
    runtime they come from (`c.RUNTIME_TARGET_LABELS`) for the chart's dashboard and
    alerts. The operator's labels win over the spec's extra labels."""
    runtime = context.runtime
    observability = runtime.spec.observability
    monitor = observability.monitor if observability else None
    if monitor is None:
        raise ValueError("a PodMonitor is rendered only with spec.observability.monitor")
    endpoint: dict[str, Any] = {"port": c.PORT_NAME, "path": c.METRICS_PATH}
    if monitor.interval is not None:
        endpoint["interval"] = monitor.interval
    endpoint["relabelings"] = [
        {"sourceLabels": [source], "targetLabel": target}
        for target, source in c.RUNTIME_TARGET_LABELS.items()
    ]
    spec = {
        "selector": {"matchLabels": selector_labels(runtime.metadata.name)},
        "podMetricsEndpoints": [endpoint],
    }
    manifest = _object(runtime, "PodMonitor", spec=spec)
    manifest["metadata"]["labels"] = (monitor.labels or {}) | manifest["metadata"]["labels"]
    return manifest
