"""The name of every rule the validation checks, and where docs/webhook-rules.md explains it.

Each rule is checked in one place (`common.parsing`, `common.validation`,
`offline.checks`), which names the rule it checks in `FieldError.rule`;
this module only lists the names, so output that names rules (SARIF's
`ruleId`, `validate -o json`) and the catalogue in docs/webhook-rules.md
agree. The rules a stored runtime may break keep their `TolerableRule`
names (`common.ratcheting`): a name is never shared by a tolerated and an
enforced check, so a name alone decides.
"""

from dataclasses import dataclass
from enum import StrEnum

from trussium_operator.common.ratcheting import TolerableRule

RULES_DOC = "docs/webhook-rules.md"


class Rule(StrEnum):
    """The enforced rules, the warnings and the checks of files; values name them in output."""

    REQUIRED_VALUE = "RequiredValue"
    FIELD_TYPE = "FieldType"
    UNKNOWN_FIELD = "UnknownField"
    SUPPORTED_VALUES = "SupportedValues"
    VALUE_BOUNDS = "ValueBounds"
    JSON_LIMITS = "JSONLimits"
    COLLECTION_TOO_LARGE = "CollectionTooLarge"
    IMAGE_TAG_OR_DIGEST = "ImageTagOrDigest"
    NETWORK_POLICY_INGRESS = "NetworkPolicyIngress"
    AUTOSCALING_BOUNDS = "AutoscalingBounds"
    SECURITY_PROFILE_REFUSED = "SecurityProfileAnnotationRefused"
    KEYS_AND_VALUES = "KeysAndValues"
    RESERVED_KEY = "ReservedKey"
    SOURCE_RANGES = "LoadBalancerSourceRanges"
    LOAD_BALANCER_FIELDS = "LoadBalancerFieldsNeedLoadBalancer"
    MONITOR_NEEDS_METRICS = "MonitorNeedsMetrics"
    TOLERATIONS_AND_AFFINITY = "TolerationsAndAffinity"
    RUNTIME_NAME = "RuntimeName"
    RESOURCES = "Resources"
    QUANTITY = "Quantity"
    SCRATCH_SPACE = "ScratchSpace"
    URL_NOT_HTTP = "URLNotHTTP"
    URL_CREDENTIALS = "URLCredentials"
    MUTABLE_TAG = "MutableImageTag"
    REPLICAS_WITH_AUTOSCALING = "ReplicasWithAutoscaling"
    PROVIDER_SETTINGS = "ProviderSettings"
    NAME_REQUIRED = "NameRequired"
    RUNTIME_METADATA = "RuntimeMetadata"
    UNSERVED_VERSION = "UnservedVersion"
    NEAR_MISS = "NearMissKind"
    DUPLICATE_RUNTIME = "DuplicateRuntime"
    DUPLICATE_KEY = "DuplicateKey"
    UNREADABLE = "Unreadable"
    SKIPPED = "Skipped"


@dataclass(frozen=True)
class RuleDoc:
    """What a rule asks for, in one line, and the anchor of its section in RULES_DOC."""

    summary: str
    anchor: str


_SHAPE = "shape-and-bounds-schema"
_LABELS = "operator-owned-pod-labels-and-annotations"
_URL = "provider-base-url"
CATALOGUE: dict[str, RuleDoc] = {
    Rule.REQUIRED_VALUE: RuleDoc("a required field is missing or empty", _SHAPE),
    Rule.FIELD_TYPE: RuleDoc("a field holds a value of the wrong type", _SHAPE),
    Rule.UNKNOWN_FIELD: RuleDoc("a field the TrussiumRuntime API does not have", _SHAPE),
    Rule.SUPPORTED_VALUES: RuleDoc("a value outside the field's enumeration", _SHAPE),
    Rule.VALUE_BOUNDS: RuleDoc("a value outside its range, length or pattern", _SHAPE),
    Rule.JSON_LIMITS: RuleDoc("nesting, numbers or text JSON cannot carry", _SHAPE),
    Rule.COLLECTION_TOO_LARGE: RuleDoc(
        "a map or list longer than any runtime may hold", "size-of-maps-and-lists"
    ),
    TolerableRule.TOO_MANY_ENTRIES: RuleDoc(
        "a map or list longer than its bound", "size-of-maps-and-lists"
    ),
    Rule.IMAGE_TAG_OR_DIGEST: RuleDoc(
        "exactly one of image tag or digest", "exactly-one-of-tag-or-digest-schema"
    ),
    Rule.NETWORK_POLICY_INGRESS: RuleDoc(
        "an enabled network policy needs an ingress rule", "network-policy-needs-a-rule-schema"
    ),
    Rule.AUTOSCALING_BOUNDS: RuleDoc(
        "maxReplicas at least minReplicas", "autoscaling-bounds-schema-and-cpu-request-webhook"
    ),
    TolerableRule.AUTOSCALING_WITHOUT_CPU_REQUEST: RuleDoc(
        "autoscaling needs a CPU request", "autoscaling-bounds-schema-and-cpu-request-webhook"
    ),
    TolerableRule.RESERVED_POD_LABEL: RuleDoc("a pod label the operator sets", _LABELS),
    TolerableRule.RESERVED_POD_ANNOTATION: RuleDoc("a pod annotation the operator sets", _LABELS),
    TolerableRule.SECURITY_PROFILE_ANNOTATION: RuleDoc(
        "an AppArmor or seccomp annotation overriding the runtime's profile",
        "security-profile-annotations",
    ),
    Rule.SECURITY_PROFILE_REFUSED: RuleDoc(
        "an AppArmor or seccomp annotation the API server refuses in a Pod",
        "security-profile-annotations",
    ),
    Rule.KEYS_AND_VALUES: RuleDoc(
        "a label, annotation or selector Kubernetes refuses",
        "keys-and-values-kubernetes-would-refuse",
    ),
    Rule.RESERVED_KEY: RuleDoc(
        "a label or annotation key of the operator's, on the Service or the PodMonitor",
        _LABELS,
    ),
    Rule.SOURCE_RANGES: RuleDoc("a load balancer source range that is not a CIDR", "the-service"),
    Rule.LOAD_BALANCER_FIELDS: RuleDoc(
        "load balancer settings on a Service that is not a LoadBalancer", "the-service"
    ),
    Rule.MONITOR_NEEDS_METRICS: RuleDoc(
        "a PodMonitor for a runtime that serves no metrics", "scraping-the-runtime"
    ),
    Rule.TOLERATIONS_AND_AFFINITY: RuleDoc(
        "a toleration or affinity term Kubernetes refuses",
        "tolerations-and-affinity-as-kubernetes-validates-them",
    ),
    Rule.RUNTIME_NAME: RuleDoc("the name must be a DNS-1035 label", "runtime-names"),
    Rule.RESOURCES: RuleDoc("resource names, requests within limits", "resources"),
    Rule.QUANTITY: RuleDoc("a quantity Kubernetes cannot count", "resources"),
    Rule.SCRATCH_SPACE: RuleDoc("the scratch space's size", "scratch-space"),
    TolerableRule.IMAGE_REFERENCE: RuleDoc(
        "the image must be a valid reference", "image-reference"
    ),
    TolerableRule.BASE_URL_NOT_HTTP: RuleDoc("the provider URL must be http(s) with a host", _URL),
    Rule.URL_NOT_HTTP: RuleDoc("a URL must be http(s) with a host", _URL),
    TolerableRule.BASE_URL_CREDENTIALS: RuleDoc("credentials in the provider URL", _URL),
    Rule.URL_CREDENTIALS: RuleDoc("credentials in a URL", _URL),
    Rule.MUTABLE_TAG: RuleDoc("the mutable tag 'latest'", "warnings"),
    Rule.REPLICAS_WITH_AUTOSCALING: RuleDoc("replicas ignored while autoscaling", "warnings"),
    Rule.PROVIDER_SETTINGS: RuleDoc("provider settings the runtime cannot serve with", "warnings"),
    Rule.NAME_REQUIRED: RuleDoc("metadata.name is required", "name-required"),
    Rule.RUNTIME_METADATA: RuleDoc("metadata a runtime cannot carry", "name-required"),
    Rule.UNSERVED_VERSION: RuleDoc("an apiVersion this release does not serve", "near-misses"),
    Rule.NEAR_MISS: RuleDoc("almost a TrussiumRuntime: kind or group misspelt", "near-misses"),
    Rule.DUPLICATE_RUNTIME: RuleDoc("the same runtime defined twice", "runtimes-defined-twice"),
    Rule.DUPLICATE_KEY: RuleDoc("a key set twice in one mapping", "keys-set-twice"),
    Rule.UNREADABLE: RuleDoc("not readable YAML or JSON", "unreadable-and-skipped-files"),
    Rule.SKIPPED: RuleDoc(
        "a Helm template, custom tags or a kustomize file, not checked as it stands",
        "unreadable-and-skipped-files",
    ),
}
