"""Which rules a stored runtime may break and still be reconciled (docs/contract.md section 12).

A new runtime meets every rule at admission. A runtime already stored (under
the Go operator's looser CRD, before a rule existed, or past the webhook) is
judged by the class of each rule it breaks:

- enforced, every rule not listed below: the rules the Go operator's CRD
  enforced, the rules whose violation the API server refuses in the objects
  the operator would apply, and the bounds on what the operator reads.
  Breaking one freezes the runtime (`InvalidSpec`, section 11): nothing the
  operator could apply would be both accepted and what the Go operator ran.
- tolerated, the `TolerableRule`s: rules this project added on top of the
  Go CRD, where rendering what the Go operator rendered is accepted by the
  API server and safe. A runtime breaking only these is reconciled, and each
  broken rule is reported (the `ConfigurationWarnings` condition).

The class of a violation is its `FieldError.rule`, set where the rule is
checked. The controller reads it to decide; the webhook, to say whether a
violation an UPDATE keeps leaves the runtime reconciled or frozen.
"""

from collections.abc import Iterable
from enum import StrEnum

from trussium_operator.common.constants import CONFIG_CHECKSUM_ANNOTATION
from trussium_operator.common.k8s_validation import FieldError


class TolerableRule(StrEnum):
    """The rules a stored runtime may break; each value names the rule in status and output."""

    RESERVED_POD_LABEL = "ReservedPodLabel"
    RESERVED_POD_ANNOTATION = "ReservedPodAnnotation"
    SECURITY_PROFILE_ANNOTATION = "SecurityProfileAnnotation"
    BASE_URL_NOT_HTTP = "BaseURLNotHTTP"
    BASE_URL_CREDENTIALS = "BaseURLCredentials"
    AUTOSCALING_WITHOUT_CPU_REQUEST = "AutoscalingWithoutCPURequest"
    IMAGE_REFERENCE = "ImageReference"
    TOO_MANY_ENTRIES = "TooManyEntries"


# What the operator does for a stored runtime that breaks the rule: what the Go operator did.
CONSEQUENCES: dict[TolerableRule, str] = {
    TolerableRule.RESERVED_POD_LABEL: "the label is left out of the Pods, as the Go operator "
    "left it out",
    TolerableRule.RESERVED_POD_ANNOTATION: "the annotation is copied to the Pods as the Go "
    f"operator copied it ({CONFIG_CHECKSUM_ANNOTATION} excepted: the operator's value wins)",
    TolerableRule.SECURITY_PROFILE_ANNOTATION: "the annotation is copied to the Pods as the Go "
    "operator copied it: a seccomp annotation has no effect since Kubernetes 1.27, an AppArmor "
    "annotation sets the runtime container's AppArmor profile",
    TolerableRule.BASE_URL_NOT_HTTP: "the value is passed to the runtime unchanged, as the Go "
    "operator passed it",
    TolerableRule.BASE_URL_CREDENTIALS: "the URL, credentials included, is written to the "
    "runtime's ConfigMap, as the Go operator wrote it",
    TolerableRule.AUTOSCALING_WITHOUT_CPU_REQUEST: "the HorizontalPodAutoscaler is created as "
    "the Go operator created it, but it cannot measure CPU utilization, so it does not scale",
    TolerableRule.IMAGE_REFERENCE: "the image is set on the Deployment as the Go operator set "
    "it; the kubelet cannot pull it",
    TolerableRule.TOO_MANY_ENTRIES: "every entry is copied to the runtime's objects as the Go "
    "operator copied it; an update must leave the collection as it is or bring it within its "
    "bound",
}
_TOLERATED = frozenset(TolerableRule)


def tolerated(error: FieldError) -> bool:
    """Whether a stored runtime that breaks this rule is still reconciled."""
    return error.rule in _TOLERATED


def split_stored(
    errors: Iterable[FieldError],
) -> tuple[tuple[FieldError, ...], tuple[FieldError, ...]]:
    """A stored runtime's violations as (freezing, tolerated)."""
    freezing: list[FieldError] = []
    kept: list[FieldError] = []
    for error in errors:
        (kept if tolerated(error) else freezing).append(error)
    return tuple(freezing), tuple(kept)


def consequence(error: FieldError) -> str:
    """What the operator does about a tolerated violation; empty for an enforced one."""
    return CONSEQUENCES[TolerableRule(error.rule)] if tolerated(error) else ""
