"""The Kubernetes API types a TrussiumRuntime spec embeds.

Only the fields Kubernetes defines for these types are accepted; their
deeper rules (operator/value combinations, label syntax, quantities) live in
`common.k8s_validation`, so that the schema stays structural like a CRD's.
"""

from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    GetJsonSchemaHandler,
    field_validator,
)
from pydantic.alias_generators import to_camel
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import core_schema

from trussium_operator.common.quantity import QUANTITY_PATTERN


def _integral(value: Any) -> Any:
    """A JSON number such as 2.0 is an integer to the API server, so it is one here too."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


@dataclass(frozen=True)
class IntFormat:
    """`format: int32`/`int64` as the API server enforces it: range checked, 2.0 accepted.

    Put it after any `Field(ge=..., le=...)` in `Annotated`, so the bounds stay
    plain JSON-schema minimum/maximum.
    """

    bits: int

    def check(self, value: int) -> int:
        low, high = -(2 ** (self.bits - 1)), 2 ** (self.bits - 1) - 1
        if not low <= value <= high:
            raise ValueError(f"must fit in a {self.bits}-bit integer ({low}..{high})")
        return value

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        checked = core_schema.no_info_after_validator_function(self.check, handler(source))
        return core_schema.no_info_before_validator_function(_integral, checked)

    def __get_pydantic_json_schema__(
        self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        # The format alone bounds the value only on newer API servers (1.32 takes
        # 2**31 for an int32); explicit bounds hold on every minor. Beyond int64 a
        # JSON number is no integer to the API server anyway.
        bounds = {}
        if self.bits < 64:
            bounds = {"minimum": -(2 ** (self.bits - 1)), "maximum": 2 ** (self.bits - 1) - 1}
        return bounds | handler(schema) | {"format": f"int{self.bits}"}


INT32 = IntFormat(32)
INT64 = IntFormat(64)


@dataclass(frozen=True)
class MaxEntries:
    """At most `count` entries: `maxItems` for a list, `maxProperties` for a map.

    Counted by the parse (`common.parsing`), not by the model: for admission a
    longer collection is cut to `count` before any rule reads it, so a review
    costs what the bounds allow whatever its size; a runtime already stored
    with a longer one (the Go operator's CRD had no bound) is read whole, and
    the breach is a rule it may break (`common.ratcheting`). ADR 0027.
    """

    count: int

    def __get_pydantic_json_schema__(
        self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        out = handler(schema)
        return out | {"maxItems" if out.get("type") == "array" else "maxProperties": self.count}


# The bounds (ADR 0027). Kubernetes counts none of these collections in a Pod; each is
# far above real use and their products keep the costliest review within its budget.
SELECTOR_LABELS = MaxEntries(8)
SELECTOR_EXPRESSIONS = MaxEntries(4)
VALUES = MaxEntries(16)
NODE_TERMS = MaxEntries(4)
NODE_EXPRESSIONS = MaxEntries(8)
NODE_FIELDS = MaxEntries(4)
POD_TERMS = MaxEntries(4)
LABEL_KEYS = MaxEntries(8)
NAMESPACES = MaxEntries(16)

Quantity = Annotated[
    # An integer quantity must fit in an int64, the API server's JSON integer.
    Annotated[int, BeforeValidator(_integral), AfterValidator(INT64.check)]
    | Annotated[str, Field(pattern=QUANTITY_PATTERN)],
    Field(description="A resource quantity, e.g. 500m or 2Gi."),
]


def unique_names(names: list[str], what: str) -> None:
    """A list-map keyed by name holds each name once (the API server enforces it too)."""
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise ValueError(f"duplicate name {duplicates[0]!r}: each {what} may be listed once")


class K8sModel(BaseModel):
    """Base for API models: camelCase on the wire, unknown fields rejected.

    Strict, because the API server does not coerce either: `"3"` is not an
    integer and `"true"` is not a boolean.
    """

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=True,
        strict=True,
    )


class LabelSelectorRequirement(K8sModel):
    """A label selector requirement: a key, an operator and values."""

    key: str = Field(description="The label key that the selector applies to.")
    operator: str = Field(description="One of In, NotIn, Exists, DoesNotExist.")
    values: Annotated[list[str], VALUES] | None = Field(
        None,
        description="Values for In and NotIn (non-empty); must be empty for Exists and "
        "DoesNotExist.",
    )


class LabelSelector(K8sModel):
    """A Kubernetes label selector; the requirements are ANDed."""

    match_labels: Annotated[dict[str, str], SELECTOR_LABELS] | None = Field(
        None, description="Labels that must match exactly."
    )
    match_expressions: Annotated[list[LabelSelectorRequirement], SELECTOR_EXPRESSIONS] | None = (
        Field(None, description="Label selector requirements.")
    )


class ResourceClaim(K8sModel):
    """A dynamically allocated resource the container uses (Kubernetes ResourceClaim)."""

    name: str = Field(
        min_length=1,
        description="The name of an entry in the Pod's spec.resourceClaims; Kubernetes rejects "
        "the Pod unless that entry exists.",
    )
    request: str | None = Field(
        None,
        description="One request of that claim; empty makes the whole claim available.",
    )


class ResourceRequirements(K8sModel):
    """Compute resources of the runtime container (Kubernetes ResourceRequirements)."""

    claims: Annotated[list[ResourceClaim], MaxEntries(8)] | None = Field(
        None,
        description="Dynamic resource claims the container uses (DynamicResourceAllocation), "
        "passed to the container unchanged.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )

    limits: Annotated[dict[str, Quantity], MaxEntries(16)] | None = Field(
        None, description="Maximum amount of each resource the container may use."
    )
    requests: Annotated[dict[str, Quantity], MaxEntries(16)] | None = Field(
        None,
        description="Amount of each resource the scheduler reserves; at most the limit. "
        "autoscaling needs requests.cpu.",
    )

    @field_validator("claims")
    @classmethod
    def _unique_claim_names(cls, value: list[ResourceClaim] | None) -> list[ResourceClaim] | None:
        unique_names([claim.name for claim in value or ()], "claim")
        return value


class Toleration(K8sModel):
    """A Kubernetes toleration, copied to the runtime Pods."""

    key: str | None = Field(
        None, description="Taint key; empty with operator Exists matches every taint."
    )
    operator: str | None = Field(None, description="Equal (default) or Exists.")
    value: str | None = Field(None, description="Taint value; must be empty for Exists.")
    effect: str | None = Field(
        None,
        description="NoSchedule, PreferNoSchedule or NoExecute; empty matches all effects.",
    )
    toleration_seconds: Annotated[int, INT64] | None = Field(
        None, description="How long a NoExecute taint is tolerated; only with effect NoExecute."
    )


class NodeSelectorRequirement(K8sModel):
    """A node selector requirement: a key, an operator and values."""

    key: str = Field(description="The node label key (or field) the selector applies to.")
    operator: str = Field(description="One of In, NotIn, Exists, DoesNotExist, Gt, Lt.")
    values: Annotated[list[str], VALUES] | None = Field(
        None,
        description="Non-empty for In and NotIn, empty for Exists and DoesNotExist, one "
        "integer for Gt and Lt.",
    )


class NodeSelectorTerm(K8sModel):
    """Node selector requirements, ANDed."""

    match_expressions: Annotated[list[NodeSelectorRequirement], NODE_EXPRESSIONS] | None = Field(
        None, description="Requirements on node labels."
    )
    match_fields: Annotated[list[NodeSelectorRequirement], NODE_FIELDS] | None = Field(
        None, description="Requirements on node fields (only metadata.name)."
    )


class NodeSelector(K8sModel):
    """Node selector terms, ORed."""

    node_selector_terms: Annotated[list[NodeSelectorTerm], NODE_TERMS] = Field(
        description="At least one term; a node matching any term is selected."
    )


class PreferredSchedulingTerm(K8sModel):
    """A weighted node preference."""

    weight: Annotated[int, INT32] = Field(description="Weight in the range 1-100.")
    preference: NodeSelectorTerm = Field(description="The preferred node selector term.")


class NodeAffinity(K8sModel):
    """Node affinity scheduling rules."""

    required_during_scheduling_ignored_during_execution: NodeSelector | None = Field(
        None, description="Nodes the runtime Pods must be scheduled on."
    )
    preferred_during_scheduling_ignored_during_execution: (
        Annotated[list[PreferredSchedulingTerm], NODE_TERMS] | None
    ) = Field(None, description="Nodes the scheduler prefers.")


class PodAffinityTerm(K8sModel):
    """A set of Pods, by labels and namespaces, and the topology domain to co-locate in."""

    label_selector: LabelSelector | None = Field(None, description="The Pods to match.")
    namespace_selector: LabelSelector | None = Field(
        None, description="The namespaces to look for matching Pods in."
    )
    namespaces: Annotated[list[str], NAMESPACES] | None = Field(
        None, description="Namespace names to look in."
    )
    topology_key: str = Field(
        description="The node label whose value defines the topology domain; required."
    )
    match_label_keys: Annotated[list[str], LABEL_KEYS] | None = Field(
        None, description="Pod label keys whose values are added to the selector (In)."
    )
    mismatch_label_keys: Annotated[list[str], LABEL_KEYS] | None = Field(
        None, description="Pod label keys whose values are added to the selector (NotIn)."
    )


class WeightedPodAffinityTerm(K8sModel):
    """A weighted Pod (anti-)affinity preference."""

    weight: Annotated[int, INT32] = Field(description="Weight in the range 1-100.")
    pod_affinity_term: PodAffinityTerm = Field(description="The Pod affinity term.")


class PodAffinity(K8sModel):
    """Pod (anti-)affinity scheduling rules."""

    required_during_scheduling_ignored_during_execution: (
        Annotated[list[PodAffinityTerm], POD_TERMS] | None
    ) = Field(None, description="Terms that must hold.")
    preferred_during_scheduling_ignored_during_execution: (
        Annotated[list[WeightedPodAffinityTerm], POD_TERMS] | None
    ) = Field(None, description="Terms the scheduler prefers.")


class Affinity(K8sModel):
    """Kubernetes affinity rules, copied to the runtime Pods."""

    node_affinity: NodeAffinity | None = Field(None, description="Node affinity.")
    pod_affinity: PodAffinity | None = Field(None, description="Pod affinity.")
    pod_anti_affinity: PodAffinity | None = Field(None, description="Pod anti-affinity.")
