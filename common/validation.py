"""Validation of TrussiumRuntime objects: the verdict of the webhook and the offline tools.

Two layers, reported together, on top of the one parse (`common.parsing`):
- the schema errors of the parse: what the CRD schema enforces (the models
  of `common.api`, unknown fields, the CEL rules), after the API server's
  defaulting, so the offline validator and a cluster without the webhook
  agree exactly;
- the rules a schema cannot express (docs/contract.md section 10), ported from
  Kubernetes in `common.k8s_validation`.
Soft problems become warnings; on UPDATE, a violation the old object already
had becomes a warning too (`ratchet`), so unrelated edits are never blocked.
Every violation names its rule (`FieldError.rule`, `common.rules`); a stored
runtime may break those named by a `TolerableRule` and still be reconciled
(`common.ratcheting`).
"""

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlsplit

from trussium_operator.common import constants, k8s_validation
from trussium_operator.common.api import TrussiumRuntime, TrussiumRuntimeSpec
from trussium_operator.common.images import render_image
from trussium_operator.common.json_limits import shown
from trussium_operator.common.k8s_validation import FieldError
from trussium_operator.common.parsing import ParsedRuntime, parse_runtime
from trussium_operator.common.provider_warnings import provider_warnings
from trussium_operator.common.quantity import QuantityError, parse_quantity
from trussium_operator.common.ratcheting import TolerableRule, tolerated
from trussium_operator.common.references import referenced_secret_paths
from trussium_operator.common.rules import Rule

__all__ = [
    "FieldError",
    "ValidationResult",
    "ratchet",
    "validate_runtime",
    "with_missing_secrets",
]


@dataclass(frozen=True)
class ValidationResult:
    """The verdict, and what the parse behind it yielded, so no later step parses again.

    `parsed` and `secret_paths` (each referenced Secret name with the field
    path of its first reference, sorted by name; empty unless the spec
    parsed) take no part in comparisons, and `parsed` none in the repr: it
    holds the object's values.
    """

    errors: tuple[FieldError, ...]
    field_warnings: tuple[FieldError, ...] = ()
    parsed: ParsedRuntime | None = field(default=None, compare=False, repr=False)
    secret_paths: Mapping[str, str] = field(default_factory=dict, compare=False)

    @property
    def allowed(self) -> bool:
        return not self.errors

    @property
    def warnings(self) -> tuple[str, ...]:
        """As an admission response carries them: `path: message`."""
        return tuple(f"{w.path}: {w.message}" for w in self.field_warnings)

    @property
    def runtime(self) -> TrussiumRuntime | None:
        """The parsed runtime, for rendering and status; None unless the schema holds."""
        return self.parsed.runtime if self.parsed else None


MUTABLE_TAG = "latest"
APPARMOR_PREFIX = "container.apparmor.security.beta.kubernetes.io/"
SECCOMP_POD = "seccomp.security.alpha.kubernetes.io/pod"
SECCOMP_CONTAINER_PREFIX = "container.seccomp.security.alpha.kubernetes.io/"
SECCOMP_RUNTIME_DEFAULT = ("runtime/default", "docker/default")
UNCONFINED = "unconfined"
LOCALHOST_PROFILE_PREFIX = "localhost/"
SECURITY_PROFILE_MESSAGE = (
    "unsupported Pod customization: the operator enforces the runtime's security profile "
    "(RuntimeDefault seccomp), which AppArmor and seccomp annotations would override; remove it"
)


def _seccomp_profile_problem(profile: str) -> str | None:
    """Why the API server refuses `profile` in a seccomp annotation (ValidateSeccompProfile)."""
    if profile in (*SECCOMP_RUNTIME_DEFAULT, UNCONFINED):
        return None
    if profile.startswith(LOCALHOST_PROFILE_PREFIX):
        path = profile.removeprefix(LOCALHOST_PROFILE_PREFIX)
        if path.startswith("/") or ".." in path.split("/"):
            return "a localhost/ seccomp profile must be a relative path without '..'"
        return None
    return "not a seccomp profile: runtime/default, unconfined or localhost/<path>"


def _refused_security_annotation(key: str, value: str) -> str | None:
    """Why the API server refuses this AppArmor or seccomp annotation in the operator's
    Pod template (Kubernetes' ValidatePodTemplateSpec), or None when it accepts it."""
    if key == SECCOMP_POD:
        if value not in SECCOMP_RUNTIME_DEFAULT:
            return "it must match the Pod's seccomp profile, RuntimeDefault (runtime/default)"
        return None
    if key.startswith(SECCOMP_CONTAINER_PREFIX):
        return _seccomp_profile_problem(value)
    container = key.removeprefix(APPARMOR_PREFIX)
    if container != constants.CONTAINER_NAME:
        return f"the Pod has no container {shown(container)}, only {constants.CONTAINER_NAME!r}"
    if value in ("", SECCOMP_RUNTIME_DEFAULT[0], UNCONFINED) or value.startswith(
        LOCALHOST_PROFILE_PREFIX
    ):
        return None
    return "not an AppArmor profile: runtime/default, unconfined or localhost/<name>"


def _security_annotation_error(at: str, key: str, value: object) -> FieldError:
    """Tolerated on a stored runtime only where the API server accepts the annotation."""
    refused = _refused_security_annotation(key, value) if isinstance(value, str) else None
    if refused is None:
        return FieldError(
            at,
            SECURITY_PROFILE_MESSAGE,
            "FieldValueForbidden",
            TolerableRule.SECURITY_PROFILE_ANNOTATION,
        )
    return FieldError(
        at,
        f"{SECURITY_PROFILE_MESSAGE}; the API server refuses it in the Pod template too: {refused}",
        "FieldValueForbidden",
        Rule.SECURITY_PROFILE_REFUSED,
    )


def _named(rule: Rule, errors: Iterable[FieldError]) -> Iterator[FieldError]:
    """`errors` of a check of `common.k8s_validation`, named after the rule it serves here."""
    return (error if error.rule else replace(error, rule=rule) for error in errors)


def _label_errors(labels: Mapping[str, Any], path: str, rule: str) -> Iterator[FieldError]:
    """Labels of an object the operator labels: label-shaped, none of the operator's."""
    for key in labels:
        if key in constants.OPERATOR_LABEL_KEYS:
            yield FieldError(
                f"{path}[{key}]",
                f"label {key} is set by the operator and cannot be overridden; remove it",
                "FieldValueForbidden",
                rule,
            )
    yield from _named(Rule.KEYS_AND_VALUES, k8s_validation.validate_labels(labels, path))


def _pod_metadata_errors(pod_metadata: Mapping[str, Any]) -> Iterator[FieldError]:
    path = "spec.podMetadata"
    labels = k8s_validation.as_dict(pod_metadata.get("labels"))
    yield from _label_errors(labels, f"{path}.labels", TolerableRule.RESERVED_POD_LABEL)
    annotations = k8s_validation.as_dict(pod_metadata.get("annotations"))
    for key, value in annotations.items():
        at = f"{path}.annotations[{key}]"
        if str(key).startswith(constants.ANNOTATION_PREFIX):
            yield _reserved_annotation_error(at, TolerableRule.RESERVED_POD_ANNOTATION)
        elif str(key).startswith((APPARMOR_PREFIX, SECCOMP_CONTAINER_PREFIX)) or key == SECCOMP_POD:
            yield _security_annotation_error(at, str(key), value)
    yield from _named(
        Rule.KEYS_AND_VALUES,
        k8s_validation.validate_annotations(annotations, f"{path}.annotations"),
    )


def _reserved_annotation_error(at: str, rule: str = "") -> FieldError:
    return FieldError(
        at,
        f"annotations with the {constants.ANNOTATION_PREFIX} prefix are reserved for the "
        "operator; remove it",
        "FieldValueForbidden",
        rule,
    )


def _service_errors(service: Mapping[str, Any]) -> Iterator[FieldError]:
    """The Service's annotations as the API server takes them, less the operator's prefix;
    its load balancer's source ranges as CIDRs."""
    path = "spec.service"
    annotations = k8s_validation.as_dict(service.get("annotations"))
    for key in annotations:
        if str(key).startswith(constants.ANNOTATION_PREFIX):
            yield _reserved_annotation_error(f"{path}.annotations[{key}]", Rule.RESERVED_KEY)
    yield from _named(
        Rule.KEYS_AND_VALUES,
        k8s_validation.validate_annotations(annotations, f"{path}.annotations"),
    )
    ranges = k8s_validation.as_list(service.get("loadBalancerSourceRanges"))
    for i, cidr in enumerate(ranges):
        problem = k8s_validation.cidr_problem(cidr) if isinstance(cidr, str) else None
        if problem:
            yield FieldError(
                f"{path}.loadBalancerSourceRanges[{i}]",
                f"invalid CIDR {shown(cidr)}: {problem}",
                rule=Rule.SOURCE_RANGES,
            )


def _url_credentials_errors(
    path: str, url: object, instead: str, rule: str = Rule.URL_CREDENTIALS
) -> Iterator[FieldError]:
    """A URL goes to the runtime's ConfigMap, which is no place for a credential."""
    if not isinstance(url, str):
        return
    try:
        parts = urlsplit(url)
    except ValueError:
        return  # the schema's URL rule reports it
    if "@" in parts.netloc:
        # Never echo the value: it holds credentials.
        yield FieldError(
            path, f"must not contain user credentials; {instead}", "FieldValueForbidden", rule
        )


def _scratch_errors(
    scratch: Mapping[str, Any], resources: Mapping[str, Any]
) -> Iterator[FieldError]:
    """docs/contract.md section 12: room for a few spooled uploads, within the
    ephemeral storage the scratch space counts in."""
    path = "spec.scratch.sizeLimit"
    if "sizeLimit" not in scratch:
        return
    try:
        size = parse_quantity(scratch["sizeLimit"])
    except QuantityError as error:
        yield FieldError(path, str(error), rule=Rule.QUANTITY)
        return
    if size < parse_quantity(constants.SCRATCH_MIN_SIZE):
        yield FieldError(
            path,
            f"must be at least {constants.SCRATCH_MIN_SIZE}: the runtime spools every upload "
            "over 1 MB there, and the kubelet evicts the Pod when it is full",
            rule=Rule.SCRATCH_SPACE,
        )
    limits = k8s_validation.as_dict(resources.get("limits"))
    try:
        limit = parse_quantity(limits[constants.EPHEMERAL_STORAGE])
    except (KeyError, QuantityError):
        return  # no limit, or one validate_resources reports
    if size > limit:
        yield FieldError(
            path,
            f"must be at most spec.resources.limits[{constants.EPHEMERAL_STORAGE}] "
            f"({shown(limits[constants.EPHEMERAL_STORAGE])}): the scratch space counts in the "
            "container's ephemeral storage, so the Pod would be evicted before it is full",
            rule=Rule.SCRATCH_SPACE,
        )


def _semantic_errors(
    spec: Mapping[str, Any], model: TrussiumRuntimeSpec | None
) -> Iterator[FieldError]:
    """docs/contract.md section 10: what the schema cannot say. Robust to ill-typed parts."""
    as_dict = k8s_validation.as_dict
    yield from _pod_metadata_errors(as_dict(spec.get("podMetadata")))
    yield from _service_errors(as_dict(spec.get("service")))
    scheduling = as_dict(spec.get("scheduling"))
    yield from _named(
        Rule.KEYS_AND_VALUES,
        k8s_validation.validate_labels(
            scheduling.get("nodeSelector"), "spec.scheduling.nodeSelector", "node selector key"
        ),
    )
    yield from _named(
        Rule.TOLERATIONS_AND_AFFINITY,
        k8s_validation.validate_tolerations(
            scheduling.get("tolerations"), "spec.scheduling.tolerations"
        ),
    )
    yield from _named(
        Rule.TOLERATIONS_AND_AFFINITY,
        k8s_validation.validate_affinity(scheduling.get("affinity"), "spec.scheduling.affinity"),
    )
    network_policy = as_dict(spec.get("networkPolicy"))
    for peers in ("ingress", "scrapers"):
        for i, peer in enumerate(k8s_validation.as_list(network_policy.get(peers))):
            for selector in ("namespaceSelector", "podSelector"):
                yield from _named(
                    Rule.KEYS_AND_VALUES,
                    k8s_validation.validate_label_selector(
                        as_dict(peer).get(selector), f"spec.networkPolicy.{peers}[{i}].{selector}"
                    ),
                )
    monitor = as_dict(as_dict(spec.get("observability")).get("monitor"))
    yield from _label_errors(
        as_dict(monitor.get("labels")), "spec.observability.monitor.labels", Rule.RESERVED_KEY
    )
    resources = as_dict(spec.get("resources"))
    yield from _named(
        Rule.RESOURCES, k8s_validation.validate_resources(resources, "spec.resources")
    )
    yield from _scratch_errors(as_dict(spec.get("scratch")), resources)
    yield from _url_credentials_errors(
        "spec.provider.baseURL",
        as_dict(spec.get("provider")).get("baseURL"),
        "put the API key in a Secret and reference it with spec.provider.credentialsSecretRef",
        TolerableRule.BASE_URL_CREDENTIALS,
    )
    yield from _url_credentials_errors(
        "spec.reranking.baseURL",
        as_dict(spec.get("reranking")).get("baseURL"),
        "put the API key in a Secret and reference it with spec.reranking.credentialsSecretRef",
    )
    yield from _url_credentials_errors(
        "spec.observability.tracing.otlpEndpoint",
        as_dict(as_dict(spec.get("observability")).get("tracing")).get("otlpEndpoint"),
        "the runtime sends traces without credentials",
    )
    # Read from the plain spec, not the model, so it is reported beside schema errors too.
    if as_dict(spec.get("autoscaling")).get("enabled") is True and (
        "cpu" not in as_dict(resources.get("requests"))
    ):
        yield FieldError(
            "spec.autoscaling.enabled",
            "autoscaling needs spec.resources.requests.cpu: CPU utilization is measured "
            "against the CPU request",
            "FieldValueRequired",
            TolerableRule.AUTOSCALING_WITHOUT_CPU_REQUEST,
        )
    if model is not None:
        problem = k8s_validation.image_reference_problem(render_image(model.image))
        if problem:
            yield FieldError(
                "spec.image.repository",
                f"{render_image(model.image)!r} is not a valid image reference: {problem}",
                rule=TolerableRule.IMAGE_REFERENCE,
            )


def _name_errors(metadata: Mapping[str, Any]) -> list[FieldError]:
    """CONTRACT section 11: the name must fit every managed object's name and label value."""
    name = metadata.get("name")
    if not isinstance(name, str) or not name:
        return []  # generateName: the API server sets the name before validation
    return [
        FieldError(
            "metadata.name",
            f"invalid runtime name {shown(name)}: {problem}; the operator names the runtime's "
            f"Service and other objects after it and puts it in their {constants.LABEL_INSTANCE} "
            "label",
            rule=Rule.RUNTIME_NAME,
        )
        for problem in k8s_validation.dns_1035_label_problems(name)
    ]


def _errors(parsed: ParsedRuntime) -> list[FieldError]:
    """Every error of a readable object: its name, then the parse's, then the other rules'."""
    errors = _name_errors(parsed.metadata) + list(parsed.errors)
    reported = {e.path for e in errors}
    spec = parsed.spec or {}
    return errors + [e for e in _semantic_errors(spec, parsed.model) if e.path not in reported]


def _warnings(model: TrussiumRuntimeSpec) -> Iterator[FieldError]:
    if model.image.tag == MUTABLE_TAG and model.image.digest is None:
        yield FieldError(
            "spec.image.tag",
            f"the mutable tag {MUTABLE_TAG!r} makes rollouts unreproducible; "
            "pin a version tag or a digest",
            rule=Rule.MUTABLE_TAG,
        )
    # Defaulting fills only an absent or null count, so a count other than the default was set.
    default_replicas = TrussiumRuntimeSpec.model_fields["replicas"].default
    if model.enabled_autoscaling is not None and model.replicas != default_replicas:
        yield FieldError(
            "spec.replicas",
            "ignored while spec.autoscaling.enabled is true; the autoscaler owns the replica count",
            rule=Rule.REPLICAS_WITH_AUTOSCALING,
        )
    yield from _named(Rule.PROVIDER_SETTINGS, provider_warnings(model))


def validate_runtime(
    obj: object, old: object = None, *, stored: bool = False, sound: bool = False
) -> ValidationResult:
    """All violations of `obj` at once, plus warnings; never raises on JSON input.

    `obj` is parsed once (`stored`: as a runtime already in the cluster; `sound`:
    already found within the JSON limits; see `parse_runtime`); with `old` (UPDATE)
    the result is `ratchet`ed.
    """
    parsed = parse_runtime(obj, stored=stored, sound=sound)
    if parsed.spec is None:
        return ValidationResult(parsed.errors, parsed=parsed)
    model = parsed.model
    result = ValidationResult(
        tuple(_errors(parsed)),
        tuple(_warnings(model)) if model else (),
        parsed=parsed,
        secret_paths=referenced_secret_paths(model) if model else {},
    )
    return result if old is None else ratchet(result, old)


def with_missing_secrets(result: ValidationResult, existing: frozenset[str]) -> ValidationResult:
    """`result` with a warning for each referenced Secret not among the `existing` names."""
    missing = tuple(
        FieldError(
            path,
            f"Secret {shown(name)} does not exist in this namespace yet; the runtime is "
            "not deployed until it does",
        )
        for name, path in result.secret_paths.items()
        if name not in existing
    )
    return replace(result, field_warnings=result.field_warnings + missing) if missing else result


_KEPT = "already present before this update, so not blocking it"
_KEPT_FROZEN = f"{_KEPT}; the operator does not reconcile this runtime until it is fixed"
_FROZEN_SPEC_CHANGE = (
    "already present before this update, and the operator does not reconcile this runtime "
    "until it is fixed: a change to its spec must fix this too"
)


def ratchet(result: ValidationResult, old: object) -> ValidationResult:
    """On UPDATE: an error `old` already had, with the same path and message, is
    demoted to a warning, which says whether the operator reconciles the runtime
    with it (`common.ratcheting`). An error that freezes the runtime is demoted only
    while the spec is unchanged: a spec change the operator would then ignore is
    refused, so whatever is admitted is acted on. `old` is parsed only when there is
    an error to demote."""
    if not result.errors or result.parsed is None or result.parsed.spec is None:
        return result
    old_parsed = parse_runtime(old)
    if old_parsed.spec is None:
        return result
    preexisting = {(e.path, e.message) for e in _errors(old_parsed)}
    spec_changed = result.parsed.spec != old_parsed.spec
    kept: list[FieldError] = []
    refused: list[FieldError] = []
    for e in result.errors:
        if (e.path, e.message) not in preexisting:
            refused.append(e)
        elif tolerated(e):
            kept.append(FieldError(e.path, f"{e.message} ({_KEPT})"))
        elif spec_changed:
            refused.append(FieldError(e.path, f"{e.message} ({_FROZEN_SPEC_CHANGE})"))
        else:
            kept.append(FieldError(e.path, f"{e.message} ({_KEPT_FROZEN})"))
    return replace(
        result, errors=tuple(refused), field_warnings=result.field_warnings + tuple(kept)
    )
