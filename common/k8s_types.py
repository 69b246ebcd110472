"""The Kubernetes API types a TrussiumRuntime spec embeds.

Only the fields Kubernetes defines for these types are accepted; their
deeper rules (operator/value combinations, label syntax, quantities) live in
`common.k8s_validation`, so that the schema stays structural like a CRD's.
"""

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

Quantity = Annotated[int | str, Field(description="A resource quantity, e.g. 500m or 2Gi.")]


class K8sModel(BaseModel):
    """Base for API models: camelCase on the wire, unknown fields rejected."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True
    )


class LabelSelectorRequirement(K8sModel):
    key: str
    operator: str
    values: list[str] | None = None


class LabelSelector(K8sModel):
    match_labels: dict[str, str] | None = None
    match_expressions: list[LabelSelectorRequirement] | None = None


class ResourceRequirements(K8sModel):
    limits: dict[str, Quantity] | None = None
    requests: dict[str, Quantity] | None = None


class Toleration(K8sModel):
    key: str | None = None
    operator: str | None = None
    value: str | None = None
    effect: str | None = None
    toleration_seconds: int | None = None


class NodeSelectorRequirement(K8sModel):
    key: str
    operator: str
    values: list[str] | None = None


class NodeSelectorTerm(K8sModel):
    match_expressions: list[NodeSelectorRequirement] | None = None
    match_fields: list[NodeSelectorRequirement] | None = None


class NodeSelector(K8sModel):
    node_selector_terms: list[NodeSelectorTerm]


class PreferredSchedulingTerm(K8sModel):
    weight: int
    preference: NodeSelectorTerm


class NodeAffinity(K8sModel):
    required_during_scheduling_ignored_during_execution: NodeSelector | None = None
    preferred_during_scheduling_ignored_during_execution: list[PreferredSchedulingTerm] | None = (
        None
    )


class PodAffinityTerm(K8sModel):
    label_selector: LabelSelector | None = None
    namespace_selector: LabelSelector | None = None
    namespaces: list[str] | None = None
    topology_key: str
    match_label_keys: list[str] | None = None
    mismatch_label_keys: list[str] | None = None


class WeightedPodAffinityTerm(K8sModel):
    weight: int
    pod_affinity_term: PodAffinityTerm


class PodAffinity(K8sModel):
    required_during_scheduling_ignored_during_execution: list[PodAffinityTerm] | None = None
    preferred_during_scheduling_ignored_during_execution: list[WeightedPodAffinityTerm] | None = (
        None
    )


class Affinity(K8sModel):
    node_affinity: NodeAffinity | None = None
    pod_affinity: PodAffinity | None = None
    pod_anti_affinity: PodAffinity | None = None
