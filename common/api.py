"""Pydantic models of the runtime.trussium.io/v1alpha1 TrussiumRuntime API.

The single source of truth for the API's shape, bounds and defaults: the CRD
in charts/trussium-operator/crds/ is generated from these models
(`python -m common.crd`), and a test fails when the two disagree.
"""

from typing import Annotated, Literal

from pydantic import Field

from common.k8s_types import (
    Affinity,
    K8sModel,
    LabelSelector,
    ResourceRequirements,
    Toleration,
)

DNS_SUBDOMAIN_PATTERN = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"
IMAGE_REPOSITORY_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:/-]*$"
IMAGE_TAG_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$"
IMAGE_DIGEST_PATTERN = r"^sha256:[a-f0-9]{64}$"
SECRET_KEY_PATTERN = r"^[A-Za-z0-9._-]+$"

Int32 = Annotated[int, Field(strict=True)]
TimeoutSeconds = Annotated[int, Field(strict=True, ge=1, le=3600)]
ObjectName = Annotated[str, Field(min_length=1, max_length=253, pattern=DNS_SUBDOMAIN_PATTERN)]


class ImageSpec(K8sModel):
    """The Trussium runtime container image: exactly one of tag or digest."""

    repository: Annotated[
        str, Field(min_length=1, max_length=255, pattern=IMAGE_REPOSITORY_PATTERN)
    ]
    tag: Annotated[str, Field(min_length=1, max_length=128, pattern=IMAGE_TAG_PATTERN)] | None = (
        None
    )
    digest: Annotated[str, Field(pattern=IMAGE_DIGEST_PATTERN)] | None = None
    pull_policy: Literal["Always", "IfNotPresent", "Never"] = "IfNotPresent"


class LocalObjectReference(K8sModel):
    name: ObjectName


class SecretKeyReference(K8sModel):
    name: ObjectName
    key: Annotated[str, Field(min_length=1, max_length=253, pattern=SECRET_KEY_PATTERN)]


class ProviderSpec(K8sModel):
    type: Literal["openai", "ollama"]
    model: Annotated[str, Field(min_length=1, max_length=255)]
    base_url: Annotated[str | None, Field(max_length=2048, alias="baseURL")] = None
    credentials_secret_ref: SecretKeyReference | None = None


class RuntimeTuning(K8sModel):
    provider_request_timeout_seconds: TimeoutSeconds | None = None
    stream_idle_timeout_seconds: TimeoutSeconds | None = None
    shutdown_drain_timeout_seconds: TimeoutSeconds | None = None


class ServiceSpec(K8sModel):
    type: Literal["ClusterIP", "NodePort", "LoadBalancer"] = "ClusterIP"
    port: Annotated[int, Field(strict=True, ge=1, le=65535)] = 9000


class NetworkPolicyIngressPeer(K8sModel):
    namespace_selector: LabelSelector
    pod_selector: LabelSelector | None = None


class NetworkPolicySpec(K8sModel):
    enabled: bool = False
    ingress: list[NetworkPolicyIngressPeer] | None = None


class AutoscalingSpec(K8sModel):
    enabled: bool = False
    min_replicas: Annotated[int, Field(strict=True, ge=1, le=1000)] = 1
    max_replicas: Annotated[int, Field(strict=True, ge=1, le=1000)] = 10
    target_cpu_utilization_percentage: Annotated[
        int, Field(strict=True, ge=1, le=100, alias="targetCPUUtilizationPercentage")
    ] = 80


class PodMetadata(K8sModel):
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None


class SchedulingSpec(K8sModel):
    node_selector: dict[str, str] | None = None
    tolerations: list[Toleration] | None = None
    affinity: Affinity | None = None


class TrussiumRuntimeSpec(K8sModel):
    image: ImageSpec
    replicas: Annotated[int, Field(strict=True, ge=0, le=1000)] = 1
    image_pull_secrets: Annotated[list[LocalObjectReference], Field(max_length=20)] | None = None
    provider: ProviderSpec
    runtime: RuntimeTuning | None = None
    service: ServiceSpec = ServiceSpec()
    network_policy: NetworkPolicySpec | None = None
    autoscaling: AutoscalingSpec | None = None
    resources: ResourceRequirements | None = None
    pod_metadata: PodMetadata | None = None
    scheduling: SchedulingSpec | None = None


class Condition(K8sModel):
    """A metav1.Condition."""

    type: str
    status: Literal["True", "False", "Unknown"]
    reason: str
    message: str = ""
    observed_generation: int | None = None
    last_transition_time: str


class TrussiumRuntimeStatus(K8sModel):
    observed_generation: int | None = None
    ready_replicas: int = 0
    available_replicas: int = 0
    desired_image: str = ""
    current_image: str = ""
    last_successful_image: str = ""
    endpoint: str = ""
    conditions: list[Condition] = []


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
    status: TrussiumRuntimeStatus | None = None
