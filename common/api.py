"""Pydantic models of the runtime.trussium.io/v1alpha1 TrussiumRuntime API.

The single source of truth for the API's shape, bounds and defaults: the CRD
in charts/trussium-operator/files/crds/ is generated from these models
(`make crd`), and a test fails when the two disagree. Field
descriptions become the CRD's (`kubectl explain`) and docs/api-reference.md.

Cross-field rules are declared once as `CelRule`s: the CRD carries their CEL
expression, the models enforce their Python reading, both with one message.
"""

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Final, Literal, Self

from pydantic import Field, ValidationInfo, field_validator, model_validator
from pydantic.config import JsonDict

from trussium_operator.common.constants import READINESS_PROBE_TIMING
from trussium_operator.common.k8s_types import (
    INT32,
    INT64,
    Affinity,
    K8sModel,
    LabelSelector,
    MaxEntries,
    Quantity,
    ResourceRequirements,
    Toleration,
    unique_names,
)
from trussium_operator.common.ratcheting import TolerableRule
from trussium_operator.common.rules import Rule

DNS_SUBDOMAIN_PATTERN = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"
IMAGE_REPOSITORY_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:/-]*$"
IMAGE_TAG_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$"
IMAGE_DIGEST_PATTERN = r"^sha256:[a-f0-9]{64}$"
SECRET_KEY_PATTERN = r"^[A-Za-z0-9._-]+$"
# No leading or trailing whitespace: the runtime strips it, and would ask for another name.
# Spelled out, since `\S` is Unicode-aware in pydantic's regex engine and ASCII in Go's.
TRIMMED_PATTERN = r"^[^ \t\n\r\f\v](.*[^ \t\n\r\f\v])?$"
DATE_TIME: JsonDict = {"format": "date-time"}


@dataclass(frozen=True)
class CelRule:
    """A cross-field rule: CEL for the CRD, `holds` for the models, one message.

    `name` names the rule (`common.rules`); a stored runtime may break those named by a
    `TolerableRule` (`common.ratcheting`).
    """

    rule: str
    message: str
    holds: Callable[[Any], bool]
    name: str = ""

    def schema(self) -> dict[str, Any]:
        """The CRD's rule, ratcheted: a value unchanged since the old object passes.

        The API server ratchets by itself from 1.30, but on status writes only from
        1.33; before, a stored runtime that breaks a rule added after it was stored
        could not take a status update at all. With `optionalOldSelf` the rule
        still runs on create (no old value) and on every changed value.
        """
        return {
            "rule": f"(oldSelf.hasValue() && oldSelf.value() == self) || ({self.rule})",
            "optionalOldSelf": True,
            "message": self.message,
        }


class RuleViolationError(ValueError):
    """A CelRule that does not hold; the parse reads the rule's name from it."""

    def __init__(self, rule: CelRule) -> None:
        super().__init__(rule.message)
        self.rule = rule


# The validation context key of the tolerable rules a parse lets pass, and the context
# that models a stored runtime: every rule it may break lets it pass.
TOLERATED_RULES = "toleratedRules"
STORED_RUNTIME: Final = {TOLERATED_RULES: frozenset(TolerableRule)}


_URL_HEAD = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://([^/?]*)([^?]*)")
_USERINFO = re.compile(r"[A-Za-z0-9\-._:~!$&'()*+,;=%@]*")
_HOST = re.compile(r"(?:[A-Za-z0-9\-._~$&'()*+,;=:\[\]<>\"]|[^\x00-\x7f])*")
_PORT = re.compile(r"(?::[0-9]*)?")
_BAD_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _http_url_with_host(url: str) -> bool:
    """Python reading of `BASE_URL_IS_HTTP`'s CEL, which parses with Go's url.ParseRequestURI.

    Mirrors what Go rejects (control characters, bad ports, bad escapes,
    characters not allowed in a host or user info), so the CRD and the
    offline validator agree.
    """
    head = _URL_HEAD.match(url)
    if head is None or _CONTROL.search(url):
        return False
    scheme, authority, path = head.groups()
    userinfo, _, host = authority.rpartition("@")
    if host.startswith("["):
        hostname, bracket, port = host[1:].partition("]")
        if not bracket:
            return False
    else:
        hostname, colon, port = host.rpartition(":")
        hostname, port = (hostname, colon + port) if colon else (host, "")
    return (
        scheme.lower() in ("http", "https")
        and bool(hostname)
        and _USERINFO.fullmatch(userinfo) is not None
        and _HOST.fullmatch(hostname) is not None
        and _PORT.fullmatch(port) is not None
        and _BAD_ESCAPE.search(path) is None
    )


IMAGE_TAG_XOR_DIGEST = CelRule(
    rule="has(self.tag) != has(self.digest)",
    message="exactly one of tag or digest must be specified",
    holds=lambda image: (image.tag is None) != (image.digest is None),
    name=Rule.IMAGE_TAG_OR_DIGEST,
)
NETWORK_POLICY_NEEDS_INGRESS = CelRule(
    rule="!self.enabled || (has(self.ingress) && size(self.ingress) > 0)",
    message="at least one ingress rule is required when networkPolicy.enabled is true",
    holds=lambda policy: not policy.enabled or bool(policy.ingress),
    name=Rule.NETWORK_POLICY_INGRESS,
)
AUTOSCALING_BOUNDS_ORDERED = CelRule(
    rule="self.maxReplicas >= self.minReplicas",
    message="maxReplicas must be greater than or equal to minReplicas",
    holds=lambda autoscaling: autoscaling.max_replicas >= autoscaling.min_replicas,
    name=Rule.AUTOSCALING_BOUNDS,
)
_HTTP_URL_RULE = (
    "isURL(self) && url(self).getScheme() in ['http', 'https'] && url(self).getHostname() != ''"
)
BASE_URL_IS_HTTP = CelRule(
    rule=_HTTP_URL_RULE,
    message="must be an absolute http or https URL with a host, e.g. http://ollama:11434/v1",
    holds=_http_url_with_host,
    name=TolerableRule.BASE_URL_NOT_HTTP,
)
# The same rule on fields the Go operator never had: no stored runtime can break it.
URL_IS_HTTP = CelRule(
    rule=_HTTP_URL_RULE,
    message="must be an absolute http or https URL with a host",
    holds=_http_url_with_host,
    name=Rule.URL_NOT_HTTP,
)


def _cel(*rules: CelRule) -> dict[str, Any]:
    return {"x-kubernetes-validations": [r.schema() for r in rules]}


def _check(model: Any, *rules: CelRule, info: ValidationInfo | None = None) -> None:
    tolerated = ((info.context if info else None) or {}).get(TOLERATED_RULES) or ()
    for rule in rules:
        if not rule.holds(model) and not (rule.name and rule.name in tolerated):
            raise RuleViolationError(rule)


def _bounds(low: int, high: int) -> Any:
    return Field(ge=low, le=high)


ObjectName = Annotated[
    str,
    Field(
        min_length=1,
        max_length=253,
        pattern=DNS_SUBDOMAIN_PATTERN,
        description="Name of a Secret in the runtime's namespace (a DNS subdomain).",
    ),
]
TimeoutSeconds = Annotated[int, _bounds(1, 3600), INT32]
# The runtime's own settings read seconds as decimals (ADR 0035): more than 0, at most an hour.
Seconds = Annotated[float, Field(gt=0, le=3600)]
# The readiness probe's timeout: a dependency check must end within it (ADR 0035).
READINESS_PROBE_TIMEOUT_SECONDS: Final = READINESS_PROBE_TIMING[1]


class ImageSpec(K8sModel):
    """The Trussium runtime container image: a repository and exactly one of tag or digest."""

    model_config = K8sModel.model_config | {"json_schema_extra": _cel(IMAGE_TAG_XOR_DIGEST)}

    repository: str = Field(
        min_length=1,
        max_length=255,
        pattern=IMAGE_REPOSITORY_PATTERN,
        description="Image repository, optionally with a registry host, e.g. "
        "ghcr.io/trussium/runtime.",
    )
    tag: str | None = Field(
        None,
        min_length=1,
        max_length=128,
        pattern=IMAGE_TAG_PATTERN,
        description="Image tag, e.g. 1.4.2. Mutable tags such as latest are warned about; "
        "prefer a digest for reproducible rollouts. Exactly one of tag or digest.",
    )
    digest: str | None = Field(
        None,
        pattern=IMAGE_DIGEST_PATTERN,
        description="Image digest, sha256:<64 hex digits>; pins the exact image. "
        "Exactly one of tag or digest.",
    )
    pull_policy: Literal["Always", "IfNotPresent", "Never"] = Field(
        "IfNotPresent", description="When the kubelet pulls the image."
    )

    @model_validator(mode="after")
    def _one_of_tag_or_digest(self) -> Self:
        _check(self, IMAGE_TAG_XOR_DIGEST)
        return self


class LocalObjectReference(K8sModel):
    """A reference to a Secret in the runtime's namespace."""

    name: ObjectName


class SecretKeyReference(K8sModel):
    """A key of a Secret in the runtime's namespace."""

    name: ObjectName
    key: str = Field(
        min_length=1,
        max_length=253,
        pattern=SECRET_KEY_PATTERN,
        description="The key in the Secret's data that holds the value.",
    )


class ProviderSpec(K8sModel):
    """The model provider the runtime talks to."""

    type: Literal["openai", "ollama"] = Field(description="The provider's API flavour.")
    model: str = Field(min_length=1, max_length=255, description="The model name to serve.")
    base_url: str | None = Field(
        None,
        alias="baseURL",
        max_length=2048,
        description="The provider's API root, an absolute http or https URL without "
        "credentials: the runtime calls <baseURL>/responses and <baseURL>/models, so for "
        "Ollama it ends in /v1, e.g. http://ollama.models:11434/v1. Unset: OpenAI's own API, "
        "or for ollama http://127.0.0.1:11434/v1, the runtime's own Pod.",
        json_schema_extra=_cel(BASE_URL_IS_HTTP),
    )
    credentials_secret_ref: SecretKeyReference | None = Field(
        None,
        description="The Secret key holding the provider API key, passed to the runtime as "
        "TRUSSIUM_PROVIDER__API_KEY. The operator reads only the Secret's metadata.",
    )

    @field_validator("base_url")
    @classmethod
    def _base_url_is_http(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is not None:
            _check(value, BASE_URL_IS_HTTP, info=info)
        return value


class RuntimeTuning(K8sModel):
    """Runtime timeouts; each unset one keeps the runtime's own default."""

    provider_request_timeout_seconds: TimeoutSeconds | None = Field(
        None, description="Timeout of one provider request, in seconds."
    )
    stream_idle_timeout_seconds: TimeoutSeconds | None = Field(
        None, description="How long a streamed response may stay idle, in seconds."
    )
    shutdown_drain_timeout_seconds: TimeoutSeconds | None = Field(
        None,
        description="How long the runtime drains in-flight requests on shutdown, in seconds "
        "(default 30); the Pod's termination grace period is this plus 6.",
    )
    service_cleanup_timeout_seconds: Seconds | None = Field(
        None,
        description="How long one of the runtime's service cleanup hooks may take on "
        "shutdown, in seconds, e.g. 2.5 (runtime default 10).",
    )
    component_health_timeout_seconds: Seconds | None = Field(
        None,
        description="How long one runtime component health check may take, in seconds "
        "(runtime default 1).",
    )
    capability_availability_timeout_seconds: Seconds | None = Field(
        None,
        description="How long one capability availability check may take, in seconds "
        "(runtime default 1).",
    )
    capability_health_timeout_seconds: Seconds | None = Field(
        None,
        description="How long one capability health check may take, in seconds "
        "(runtime default 1).",
    )


class ReadinessSpec(K8sModel):
    """Whether the runtime is ready only while its provider answers; an unset field keeps
    the runtime's own default."""

    dependency_checks: bool | None = Field(
        None,
        description="Gate readiness on the provider (runtime default false): the runtime "
        "answers its readiness probe only while the provider serves requiredModel "
        "(GET <baseURL>/models/<requiredModel> succeeds), so a Pod whose provider is down or "
        "refuses its credentials takes no traffic.",
    )
    dependency_timeout_seconds: (
        Annotated[float, Field(gt=0, lt=READINESS_PROBE_TIMEOUT_SECONDS)] | None
    ) = Field(
        None,
        description="How long one provider check may take, in seconds (runtime default 1); "
        f"less than the readiness probe's timeout, {READINESS_PROBE_TIMEOUT_SECONDS} seconds, "
        "so a slow provider fails the check, not the probe.",
    )
    dependency_cache_seconds: Seconds | None = Field(
        None,
        description="How long the runtime reuses a check's result, in seconds "
        "(runtime default 10).",
    )
    required_model: str | None = Field(
        None,
        min_length=1,
        max_length=255,
        pattern=TRIMMED_PATTERN,
        description="The model the provider must serve for the runtime to be ready; "
        "defaults to provider.model while dependencyChecks is true.",
    )


class RerankingSpec(K8sModel):
    """A Hugging Face Text Embeddings Inference (TEI) server the runtime reranks with."""

    base_url: str = Field(
        alias="baseURL",
        max_length=2048,
        description="The TEI server's URL, an absolute http or https URL without "
        "credentials, e.g. http://tei.models:8080; the runtime posts to <baseURL>/rerank.",
        json_schema_extra=_cel(URL_IS_HTTP),
    )
    credentials_secret_ref: SecretKeyReference | None = Field(
        None,
        description="The Secret key holding the TEI API key, passed to the runtime as "
        "TRUSSIUM_RERANKING__API_KEY. The operator reads only the Secret's metadata.",
    )

    @field_validator("base_url")
    @classmethod
    def _base_url_is_http(cls, value: str) -> str:
        _check(value, URL_IS_HTTP)
        return value


class TracingSpec(K8sModel):
    """OpenTelemetry traces the runtime exports over OTLP/HTTP; an unset field keeps the
    runtime's own default."""

    enabled: bool | None = Field(
        None, description="Whether the runtime exports traces (runtime default false)."
    )
    service_name: str | None = Field(
        None,
        min_length=1,
        max_length=255,
        pattern=TRIMMED_PATTERN,
        description="The traces' service.name (runtime default trussium).",
    )
    sample_ratio: Annotated[float, Field(ge=0, le=1)] | None = Field(
        None,
        description="The share of root traces sampled, from 0 to 1, e.g. 0.25 (runtime default 1).",
    )
    otlp_endpoint: str | None = Field(
        None,
        max_length=2048,
        description="The OTLP/HTTP traces endpoint, an absolute http or https URL without "
        "credentials, e.g. http://otel-collector.observability:4318/v1/traces (runtime "
        "default http://127.0.0.1:4318/v1/traces, the runtime's own Pod).",
        json_schema_extra=_cel(URL_IS_HTTP),
    )
    export_timeout_seconds: Seconds | None = Field(
        None, description="How long one export may take, in seconds (runtime default 10)."
    )

    @field_validator("otlp_endpoint")
    @classmethod
    def _endpoint_is_http(cls, value: str | None) -> str | None:
        if value is not None:
            _check(value, URL_IS_HTTP)
        return value


# prometheus-operator's duration: units largest first, each at most once, e.g. 1m30s.
MONITOR_INTERVAL_PATTERN = r"^(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?$"
MONITOR_NEEDS_METRICS = CelRule(
    rule="!has(self.monitor) || !self.monitor.enabled || !has(self.metrics) || self.metrics",
    message="monitor.enabled needs the runtime's metrics: remove metrics: false",
    holds=lambda spec: not (spec.monitor and spec.monitor.enabled and spec.metrics is False),
    name=Rule.MONITOR_NEEDS_METRICS,
)


class MonitorSpec(K8sModel):
    """A prometheus-operator PodMonitor scraping every runtime Pod's /metrics (ADR 0047)."""

    enabled: bool = Field(
        False,
        description="Whether the operator manages a PodMonitor (monitoring.coreos.com/v1). "
        "While the cluster does not serve that API the runtime runs without one; it is "
        "created once the CRD is installed.",
    )
    interval: str | None = Field(
        None,
        min_length=2,
        max_length=16,
        pattern=MONITOR_INTERVAL_PATTERN,
        description="How often each Pod is scraped, e.g. 30s; unset: Prometheus' own "
        "scrape interval.",
    )
    labels: Annotated[dict[str, str], MaxEntries(32)] | None = Field(
        None,
        description="Extra labels of the PodMonitor, e.g. the podMonitorSelector of your "
        "Prometheus (release: prometheus); the operator's app.kubernetes.io/ labels are "
        "reserved.",
    )


class ObservabilitySpec(K8sModel):
    """The runtime's own metrics and traces; an unset field keeps the runtime's own default."""

    model_config = K8sModel.model_config | {"json_schema_extra": _cel(MONITOR_NEEDS_METRICS)}

    metrics: bool | None = Field(
        None,
        description="Whether the runtime serves Prometheus metrics at /metrics "
        "(runtime default true).",
    )
    tracing: TracingSpec | None = Field(None, description="OpenTelemetry trace export.")
    monitor: MonitorSpec | None = Field(
        None, description="A PodMonitor that has Prometheus scrape the runtime."
    )

    @model_validator(mode="after")
    def _monitor_needs_metrics(self) -> Self:
        _check(self, MONITOR_NEEDS_METRICS)
        return self


LOAD_BALANCER_FIELDS_NEED_LOAD_BALANCER = CelRule(
    rule="self.type == 'LoadBalancer' || "
    "(!has(self.loadBalancerSourceRanges) && !has(self.externalTrafficPolicy))",
    message="loadBalancerSourceRanges and externalTrafficPolicy apply only to type LoadBalancer",
    holds=lambda service: (
        service.type == "LoadBalancer"
        or (service.load_balancer_source_ranges is None and service.external_traffic_policy is None)
    ),
    name=Rule.LOAD_BALANCER_FIELDS,
)


class ServiceSpec(K8sModel):
    """The Service in front of the runtime."""

    model_config = K8sModel.model_config | {
        "json_schema_extra": _cel(LOAD_BALANCER_FIELDS_NEED_LOAD_BALANCER)
    }

    type: Literal["ClusterIP", "NodePort", "LoadBalancer"] = Field(
        "ClusterIP", description="The Service type."
    )
    port: Annotated[int, _bounds(1, 65535), INT32] = Field(
        9000, description="The Service port (the container always listens on 9000)."
    )
    annotations: Annotated[dict[str, str], MaxEntries(64)] | None = Field(
        None,
        description="Annotations of the Service, e.g. a cloud load balancer's settings; "
        "runtime.trussium.io/ keys are reserved. One removed here is removed from the Service.",
    )
    load_balancer_source_ranges: (
        Annotated[list[Annotated[str, Field(max_length=64)]], MaxEntries(64)] | None
    ) = Field(
        None,
        description="Type LoadBalancer only: the client CIDRs the load balancer admits, "
        "e.g. 10.0.0.0/8, in canonical form.",
        json_schema_extra={"x-kubernetes-list-type": "atomic"},
    )
    external_traffic_policy: Literal["Cluster", "Local"] | None = Field(
        None,
        description="Type LoadBalancer only: Local keeps the client's source address and "
        "routes only to nodes running a runtime Pod; unset, Kubernetes' default (Cluster).",
    )

    @model_validator(mode="after")
    def _load_balancer_fields(self) -> Self:
        _check(self, LOAD_BALANCER_FIELDS_NEED_LOAD_BALANCER)
        return self


class NetworkPolicyIngressPeer(K8sModel):
    """Clients allowed to reach the runtime: namespaces, and optionally Pods within them."""

    namespace_selector: LabelSelector = Field(
        description="Namespaces whose Pods may connect ({} selects all namespaces)."
    )
    pod_selector: LabelSelector | None = Field(
        None, description="Within those namespaces, only these Pods."
    )


class NetworkPolicySpec(K8sModel):
    """An optional NetworkPolicy restricting ingress to the runtime's port."""

    model_config = K8sModel.model_config | {"json_schema_extra": _cel(NETWORK_POLICY_NEEDS_INGRESS)}

    enabled: bool = Field(False, description="Whether the operator manages a NetworkPolicy.")
    ingress: Annotated[list[NetworkPolicyIngressPeer], MaxEntries(8)] | None = Field(
        None,
        description="Allowed clients; at least one when enabled.",
        json_schema_extra={"x-kubernetes-list-type": "atomic"},
    )
    scrapers: Annotated[list[NetworkPolicyIngressPeer], MaxEntries(8)] | None = Field(
        None,
        description="Prometheus servers allowed to scrape the runtime's /metrics, admitted "
        "to the runtime's port only.",
        json_schema_extra={"x-kubernetes-list-type": "atomic"},
    )

    @model_validator(mode="after")
    def _ingress_when_enabled(self) -> Self:
        _check(self, NETWORK_POLICY_NEEDS_INGRESS)
        return self


# The bounds autoscaling/v2's validation holds a HorizontalPodAutoscaler's behavior to.
MAX_STABILIZATION_WINDOW_SECONDS: Final = 3600
MAX_SCALING_PERIOD_SECONDS: Final = 1800
# The runtime's gauge of the workload requests it is serving (its /metrics).
IN_FLIGHT_REQUESTS_METRIC: Final = "trussium_http_requests_active"
PROMETHEUS_METRIC_NAME_PATTERN = r"^[a-zA-Z_:][a-zA-Z0-9_:]*$"


class ScalingPolicy(K8sModel):
    """How much the replica count may change within a period (autoscaling/v2 HPAScalingPolicy)."""

    type: Literal["Pods", "Percent"] = Field(
        description="Pods: value is a number of Pods; Percent: a percentage of the current count."
    )
    value: Annotated[int, Field(ge=1), INT32] = Field(
        description="The change allowed within periodSeconds, at least 1."
    )
    period_seconds: Annotated[int, _bounds(1, MAX_SCALING_PERIOD_SECONDS), INT32] = Field(
        description=f"The window the policy holds over, 1 to {MAX_SCALING_PERIOD_SECONDS} seconds."
    )


class ScalingRules(K8sModel):
    """How one direction of scaling behaves (autoscaling/v2 HPAScalingRules); an unset field
    keeps Kubernetes' default for that direction."""

    stabilization_window_seconds: (
        Annotated[int, _bounds(0, MAX_STABILIZATION_WINDOW_SECONDS), INT32] | None
    ) = Field(
        None,
        description="How far back the autoscaler looks for a recommendation before it acts, "
        f"0 to {MAX_STABILIZATION_WINDOW_SECONDS} seconds (Kubernetes' default: 0 up, 300 down).",
    )
    select_policy: Literal["Max", "Min", "Disabled"] | None = Field(
        None,
        description="Which policy applies when several do: Max (the largest change, "
        "Kubernetes' default), Min, or Disabled (no scaling in this direction).",
    )
    policies: Annotated[list[ScalingPolicy], MaxEntries(5), Field(min_length=1)] | None = Field(
        None,
        description="The policies, 1 to 5; unset keeps Kubernetes' default policies.",
        json_schema_extra={"x-kubernetes-list-type": "atomic"},
    )


class AutoscalingBehavior(K8sModel):
    """How fast the autoscaler scales up and down (autoscaling/v2
    HorizontalPodAutoscalerBehavior)."""

    scale_up: ScalingRules | None = Field(None, description="Rules for scaling up.")
    scale_down: ScalingRules | None = Field(None, description="Rules for scaling down.")


class InFlightRequestsTarget(K8sModel):
    """A target on the requests each runtime Pod is serving, read from the custom metrics API
    (an adapter such as prometheus-adapter serves the runtime's gauge there)."""

    target_per_pod: Annotated[int, _bounds(1, 100000), INT32] = Field(
        description="Target average of in-flight requests per Pod; above it the autoscaler "
        "adds Pods."
    )
    metric_name: str = Field(
        IN_FLIGHT_REQUESTS_METRIC,
        min_length=1,
        max_length=200,
        pattern=PROMETHEUS_METRIC_NAME_PATTERN,
        description="The Pods metric's name in custom.metrics.k8s.io, as the adapter exposes "
        "the runtime's gauge of in-flight requests.",
    )


class AutoscalingSpec(K8sModel):
    """An optional HorizontalPodAutoscaler on CPU utilization, and on in-flight requests when
    set; it then owns the replica count."""

    model_config = K8sModel.model_config | {"json_schema_extra": _cel(AUTOSCALING_BOUNDS_ORDERED)}

    enabled: bool = Field(
        False,
        description="Whether the operator manages a HorizontalPodAutoscaler; needs "
        "resources.requests.cpu.",
    )
    min_replicas: Annotated[int, _bounds(1, 1000), INT32] = Field(
        1, description="Lower bound of the replica count."
    )
    max_replicas: Annotated[int, _bounds(1, 1000), INT32] = Field(
        10, description="Upper bound of the replica count; at least minReplicas."
    )
    target_cpu_utilization_percentage: Annotated[int, _bounds(1, 100), INT32] = Field(
        80,
        alias="targetCPUUtilizationPercentage",
        description="Target average CPU utilization, in percent of the CPU request.",
    )
    in_flight_requests: InFlightRequestsTarget | None = Field(
        None,
        description="A second target, on in-flight requests per Pod; the autoscaler follows "
        "whichever of the two asks for more Pods.",
    )
    behavior: AutoscalingBehavior | None = Field(
        None, description="Scaling speed and stabilization; unset keeps Kubernetes' defaults."
    )

    @model_validator(mode="after")
    def _bounds_ordered(self) -> Self:
        _check(self, AUTOSCALING_BOUNDS_ORDERED)
        return self


class ScratchSpec(K8sModel):
    """The runtime's writable scratch space: an emptyDir at /tmp, where it spools large uploads."""

    size_limit: Quantity | None = Field(
        None,
        description="Size limit of the scratch space, at least 16Mi. It counts in the "
        "container's ephemeral storage, so at most resources.limits[ephemeral-storage] when "
        "that is set. The kubelet evicts the Pod when the scratch space holds more. "
        "Unset: 1Gi, or the ephemeral-storage limit when that is lower.",
    )


class PodMetadata(K8sModel):
    """Extra labels and annotations for the runtime Pods."""

    labels: Annotated[dict[str, str], MaxEntries(64)] | None = Field(
        None,
        description="Extra Pod labels; the operator's app.kubernetes.io/ labels are reserved.",
    )
    annotations: Annotated[dict[str, str], MaxEntries(128)] | None = Field(
        None,
        description="Extra Pod annotations; runtime.trussium.io/ keys and AppArmor/seccomp "
        "annotations are reserved.",
    )


class SchedulingSpec(K8sModel):
    """Where the runtime Pods may run."""

    node_selector: Annotated[dict[str, str], MaxEntries(32)] | None = Field(
        None, description="Node labels the Pods' nodes must have."
    )
    tolerations: Annotated[list[Toleration], MaxEntries(64)] | None = Field(
        None, description="Taints the Pods tolerate."
    )
    affinity: Affinity | None = Field(None, description="Node and Pod (anti-)affinity.")


class TrussiumRuntimeSpec(K8sModel):
    """The desired state of a Trussium runtime."""

    image: ImageSpec = Field(description="The runtime container image.")
    replicas: Annotated[int, _bounds(0, 1000), INT32] = Field(
        1, description="Number of runtime Pods; ignored while autoscaling is enabled."
    )
    image_pull_secrets: Annotated[list[LocalObjectReference], MaxEntries(20)] | None = Field(
        None,
        description="Secrets for pulling the image, in the runtime's namespace.",
        json_schema_extra={
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["name"],
        },
    )
    provider: ProviderSpec = Field(description="The model provider.")
    roll_on_secret_change: bool | None = Field(
        None,
        description="Roll the runtime Pods, with none unavailable, whenever a credentials "
        "Secret (provider.credentialsSecretRef, reranking.credentialsSecretRef) is updated, so "
        "they read the new value; unset, false. The operator reads only the Secret's metadata.",
    )
    runtime: RuntimeTuning | None = Field(None, description="Runtime timeouts.")
    readiness: ReadinessSpec | None = Field(None, description="Readiness gated on the provider.")
    reranking: RerankingSpec | None = Field(
        None, description="The reranking server (Text Embeddings Inference)."
    )
    observability: ObservabilitySpec | None = Field(
        None, description="The runtime's metrics and traces."
    )
    service: ServiceSpec = Field(
        default_factory=ServiceSpec,
        description="The Service exposing the runtime.",
        json_schema_extra={"default": {}},
    )
    network_policy: NetworkPolicySpec | None = Field(
        None, description="Optional ingress NetworkPolicy."
    )
    autoscaling: AutoscalingSpec | None = Field(
        None, description="Optional HorizontalPodAutoscaler."
    )
    resources: ResourceRequirements | None = Field(
        None, description="Compute resources of the runtime container."
    )
    scratch: ScratchSpec | None = Field(
        None,
        description="The runtime's scratch space (/tmp, TMPDIR), where it spools request "
        "bodies over 1 MB.",
    )
    pod_metadata: PodMetadata | None = Field(
        None, description="Extra labels and annotations for the runtime Pods."
    )
    scheduling: SchedulingSpec | None = Field(
        None, description="Node selector, tolerations and affinity of the runtime Pods."
    )

    @property
    def enabled_autoscaling(self) -> AutoscalingSpec | None:
        """The autoscaling settings when an autoscaler owns the replica count, else None."""
        autoscaling = self.autoscaling
        return autoscaling if autoscaling is not None and autoscaling.enabled else None

    @field_validator("image_pull_secrets")
    @classmethod
    def _unique_pull_secret_names(
        cls, value: list[LocalObjectReference] | None
    ) -> list[LocalObjectReference] | None:
        unique_names([ref.name for ref in value or ()], "Secret")
        return value


class Condition(K8sModel):
    """A standard Kubernetes condition (metav1.Condition)."""

    type: str = Field(description="Condition type, e.g. Ready or Upgrading.")
    status: Literal["True", "False", "Unknown"] = Field(description="True, False or Unknown.")
    reason: str = Field(description="A CamelCase reason for the last transition.")
    message: str = Field("", description="A human-readable explanation.")
    observed_generation: Annotated[int, INT64] | None = Field(
        None, description="The metadata.generation the condition was computed from."
    )
    last_transition_time: str = Field(
        description="When status last changed.", json_schema_extra=DATE_TIME
    )


class TrussiumRuntimeStatus(K8sModel):
    """The observed state of a Trussium runtime, written by the operator."""

    observed_generation: Annotated[int, INT64] | None = Field(
        None, description="The metadata.generation this status describes."
    )
    ready_replicas: Annotated[int, INT32] = Field(
        0, description="Ready Pods of the managed Deployment."
    )
    available_replicas: Annotated[int, INT32] = Field(
        0, description="Available Pods of the managed Deployment."
    )
    # None, not 0: absent means "not reported yet" (a status written before this field,
    # or by the Go operator); 0 is a runtime scaled to zero, and is written.
    desired_replicas: Annotated[int, INT32] | None = Field(
        None,
        description="The replica count the runtime is held to: with autoscaling, the "
        "autoscaler's (the managed Deployment's spec.replicas), otherwise spec.replicas.",
    )
    desired_image: str = Field("", description="The image rendered from spec.image.")
    current_image: str = Field(
        "", description="The image the managed Deployment's Pod template runs."
    )
    last_successful_image: str = Field("", description="The image whose rollout last completed.")
    endpoint: str = Field("", description="The in-cluster URL of the runtime's Service.")
    conditions: list[Condition] = Field(
        [],
        description="ConfigurationValid, Progressing, Available, Ready, Degraded, Upgrading; "
        "ConfigurationWarnings while a stored spec breaks rules it may break or its "
        "provider settings leave the runtime unable to serve.",
        json_schema_extra={
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["type"],
        },
    )


class ObjectMeta(K8sModel):
    """The subset of metav1.ObjectMeta the operator reads."""

    model_config = K8sModel.model_config | {"extra": "ignore"}

    name: str
    namespace: str = "default"
    uid: str = ""
    generation: int = 0
    resource_version: str = ""
    deletion_timestamp: str | None = None


class TrussiumRuntime(K8sModel):
    """A TrussiumRuntime as read from the API server (defaults applied in memory)."""

    model_config = K8sModel.model_config | {"extra": "ignore"}

    api_version: str = "runtime.trussium.io/v1alpha1"
    kind: str = "TrussiumRuntime"
    metadata: ObjectMeta
    spec: TrussiumRuntimeSpec
    # Plain data, as the last reconcile wrote it: only read back, by `common.status`.
    status: dict[str, Any] | None = None
