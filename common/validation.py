"""Validation of TrussiumRuntime objects: the verdict of the webhook and the offline tools.

Two layers, reported together:
- `schema_errors`: what the CRD schema enforces (the models of `common.api`,
  unknown fields, the CEL rules), after the API server's defaulting, so the
  offline validator and a cluster without the webhook agree exactly;
- the rules a schema cannot express (docs/contract.md section 10), ported from
  Kubernetes in `common.k8s_validation`.
Soft problems become warnings; on UPDATE, a violation the old object already
had becomes a warning too (ratcheting), so unrelated edits are never blocked.
"""

import types
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from itertools import islice
from typing import Any, Union
from urllib.parse import urlsplit

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from common import api, constants, k8s_validation
from common.api import TrussiumRuntimeSpec
from common.defaulting import apply_defaults
from common.images import render_image
from common.json_limits import json_problem, path_key, shown
from common.k8s_validation import FieldError
from common.quantity import QuantityError, parse_quantity
from common.references import referenced_secret_paths

__all__ = ["FieldError", "ValidationResult", "schema_errors", "validate_runtime"]


@dataclass(frozen=True)
class ValidationResult:
    errors: tuple[FieldError, ...]
    field_warnings: tuple[FieldError, ...] = ()

    @property
    def allowed(self) -> bool:
        return not self.errors

    @property
    def warnings(self) -> tuple[str, ...]:
        """As an admission response carries them: `path: message`."""
        return tuple(f"{w.path}: {w.message}" for w in self.field_warnings)


MUTABLE_TAG = "latest"
# Entries a map or list of the spec may hold (Kubernetes has no such count,
# real specs hold a few dozen at most); larger ones are cut before any rule
# looks at them, so checking stays proportional to this, not to the input.
MAX_COLLECTION_ENTRIES = 1000
APPARMOR_PREFIX = "container.apparmor.security.beta.kubernetes.io/"
SECCOMP_POD = "seccomp.security.alpha.kubernetes.io/pod"
SECCOMP_CONTAINER_PREFIX = "container.seccomp.security.alpha.kubernetes.io/"

_PATTERN_HINTS = {
    api.DNS_SUBDOMAIN_PATTERN: "a lowercase RFC 1123 subdomain (lowercase letters, digits, "
    "'-' and '.', starting and ending with a letter or digit)",
    api.IMAGE_REPOSITORY_PATTERN: "letters, digits and '.', '_', ':', '/', '-', starting with "
    "a letter or digit",
    api.IMAGE_TAG_PATTERN: "letters, digits, '_', '.' and '-', not starting with '.' or '-'",
    api.IMAGE_DIGEST_PATTERN: "sha256: followed by 64 lowercase hexadecimal digits",
    api.SECRET_KEY_PATTERN: "letters, digits, '.', '_' and '-'",
}
_TYPE_NAMES = {
    "int_type": "an integer",
    "string_type": "a string",
    "bool_type": "a boolean",
    "dict_type": "an object",
    "model_type": "an object",
    "model_attributes_type": "an object",
    "list_type": "a list",
}


_QUANTITY_PATHS = ("spec.resources.limits[", "spec.resources.requests[")
_QUANTITY_FAILURES = ("int_type", "string_type", "string_pattern_mismatch")


def _unwrap(tp: Any) -> Any:
    """The annotation without Annotated and `| None`."""
    while True:
        if typing.get_origin(tp) is typing.Annotated:
            tp = typing.get_args(tp)[0]
            continue
        if typing.get_origin(tp) in (Union, types.UnionType):
            args = [a for a in typing.get_args(tp) if a is not type(None)]
            if len(args) == 1:
                tp = args[0]
                continue
        return tp


# Annotation -> (kind, element type or field map); the models are fixed, so each
# annotation is worked out once (keyed by identity: annotations need not be hashable).
_STEPS: dict[int, tuple[Any, str, Any]] = {}


def _step(tp: Any) -> tuple[str, Any]:
    known = _STEPS.get(id(tp))
    if known is not None and known[0] is tp:
        return known[1], known[2]
    origin = typing.get_origin(tp)
    step: tuple[str, Any] = ("scalar", None)
    if origin is list:
        step = ("list", _unwrap(typing.get_args(tp)[0]))
    elif origin is dict:
        step = ("dict", _unwrap(typing.get_args(tp)[1]))
    elif isinstance(tp, type) and issubclass(tp, BaseModel):
        fields = {f.alias or name: _unwrap(f.annotation) for name, f in tp.model_fields.items()}
        step = ("model", fields)
    _STEPS[id(tp)] = (tp, *step)
    return step


def _field_path(loc: tuple[int | str, ...]) -> str:
    """`spec.podMetadata.labels[foo]` from a pydantic location under the spec model.

    The models' types tell a field name (`.name`) from a map key or list
    index (`[key]`); union-variant tags pydantic adds are dropped.
    """
    path, tp = "spec", _unwrap(TrussiumRuntimeSpec)
    for item in loc:
        kind, inner = _step(tp)
        if kind == "list":
            path, tp = f"{path}[{item}]", inner
        elif kind == "dict":
            path, tp = f"{path}{path_key(item)}", inner
        elif kind == "model":
            path, tp = f"{path}.{item}", inner.get(str(item))
        else:
            break  # a union variant tag, or below a scalar
    return path


def _schema_error(error: ErrorDetails) -> FieldError:
    kind, ctx, value = error["type"], error.get("ctx", {}), error.get("input")
    path = _field_path(error["loc"])
    if path.startswith(_QUANTITY_PATHS) and kind in _QUANTITY_FAILURES:
        try:
            parse_quantity(value)
        except QuantityError as problem:
            return FieldError(path, str(problem))
    if kind == "missing":
        return FieldError(path, "Required value", "FieldValueRequired")
    if kind == "extra_forbidden":
        name = error["loc"][-1]
        return FieldError(
            path,
            f"unknown field {shown(name)}: not part of the TrussiumRuntime API "
            "(see docs/api-reference.md)",
            "FieldValueForbidden",
        )
    if kind == "string_too_short":
        return FieldError(path, "must not be empty", "FieldValueRequired")
    if kind == "string_too_long":
        return FieldError(
            path, f"must be at most {ctx['max_length']} characters", "FieldValueTooLong"
        )
    if kind == "too_long":
        return FieldError(path, f"must have at most {ctx['max_length']} items", "FieldValueTooMany")
    if kind == "string_pattern_mismatch":
        hint = _PATTERN_HINTS.get(ctx["pattern"], f"matching {ctx['pattern']}")
        return FieldError(path, f"invalid value {shown(value)}: must be {hint}")
    if kind == "greater_than_equal":
        return FieldError(path, f"must be greater than or equal to {ctx['ge']}")
    if kind == "less_than_equal":
        return FieldError(path, f"must be less than or equal to {ctx['le']}")
    if kind == "literal_error":
        return FieldError(
            path,
            f"unsupported value {shown(value)}: supported values: {ctx['expected']}",
            "FieldValueNotSupported",
        )
    if kind in _TYPE_NAMES:
        return FieldError(path, f"must be {_TYPE_NAMES[kind]}", "FieldValueTypeInvalid")
    if kind == "value_error":
        return FieldError(path, str(ctx["error"]))
    return FieldError(path, error["msg"])


def _one_per_path(errors: list[FieldError]) -> list[FieldError]:
    """Pydantic reports each failed variant of `int | str` (quantities); keep the first."""
    seen: dict[str, FieldError] = {}
    for error in errors:
        seen.setdefault(error.path, error)
    return list(seen.values())


def _spec_model(
    defaulted: Mapping[str, Any],
) -> tuple[TrussiumRuntimeSpec | None, list[FieldError]]:
    spec = defaulted.get("spec")
    if spec is None:
        return None, [FieldError("spec", "Required value", "FieldValueRequired")]
    try:
        return TrussiumRuntimeSpec.model_validate(spec), []
    except ValidationError as error:
        return None, _one_per_path([_schema_error(e) for e in error.errors()])


def schema_errors(obj: object) -> tuple[FieldError, ...]:
    """The violations the CRD schema itself rejects (after the API server's defaulting)."""
    if not isinstance(obj, Mapping):
        return (FieldError("", "a TrussiumRuntime must be a JSON object", "FieldValueTypeInvalid"),)
    return tuple(_spec_model(apply_defaults(obj).object)[1])


def _pod_metadata_errors(pod_metadata: Mapping[str, Any]) -> Iterator[FieldError]:
    path = "spec.podMetadata"
    labels = k8s_validation.as_dict(pod_metadata.get("labels"))
    for key in labels:
        if key in constants.OPERATOR_LABEL_KEYS:
            yield FieldError(
                f"{path}.labels[{key}]",
                f"label {key} is set by the operator and cannot be overridden; remove it",
                "FieldValueForbidden",
            )
    yield from k8s_validation.validate_labels(labels, f"{path}.labels")
    annotations = k8s_validation.as_dict(pod_metadata.get("annotations"))
    for key in annotations:
        at = f"{path}.annotations[{key}]"
        if str(key).startswith(constants.ANNOTATION_PREFIX):
            yield FieldError(
                at,
                f"annotations with the {constants.ANNOTATION_PREFIX} prefix are reserved for the "
                "operator; remove it",
                "FieldValueForbidden",
            )
        elif str(key).startswith((APPARMOR_PREFIX, SECCOMP_CONTAINER_PREFIX)) or key == SECCOMP_POD:
            yield FieldError(
                at,
                "unsupported Pod customization: the operator enforces the runtime's security "
                "profile (RuntimeDefault seccomp), which AppArmor and seccomp annotations would "
                "override; remove it",
                "FieldValueForbidden",
            )
    yield from k8s_validation.validate_annotations(annotations, f"{path}.annotations")


def _base_url_errors(base_url: object) -> Iterator[FieldError]:
    if not isinstance(base_url, str):
        return
    try:
        parts = urlsplit(base_url)
    except ValueError:
        return  # the schema's URL rule reports it
    if "@" in parts.netloc:
        # Never echo the value: it holds credentials.
        yield FieldError(
            "spec.provider.baseURL",
            "must not contain user credentials; put the API key in a Secret and reference it "
            "with spec.provider.credentialsSecretRef",
            "FieldValueForbidden",
        )


def _semantic_errors(
    spec: Mapping[str, Any], model: TrussiumRuntimeSpec | None
) -> Iterator[FieldError]:
    """docs/contract.md section 10: what the schema cannot say. Robust to ill-typed parts."""
    as_dict = k8s_validation.as_dict
    yield from _pod_metadata_errors(as_dict(spec.get("podMetadata")))
    scheduling = as_dict(spec.get("scheduling"))
    yield from k8s_validation.validate_labels(
        scheduling.get("nodeSelector"), "spec.scheduling.nodeSelector", "node selector key"
    )
    yield from k8s_validation.validate_tolerations(
        scheduling.get("tolerations"), "spec.scheduling.tolerations"
    )
    yield from k8s_validation.validate_affinity(
        scheduling.get("affinity"), "spec.scheduling.affinity"
    )
    network_policy = as_dict(spec.get("networkPolicy"))
    for i, peer in enumerate(k8s_validation.as_list(network_policy.get("ingress"))):
        for selector in ("namespaceSelector", "podSelector"):
            yield from k8s_validation.validate_label_selector(
                as_dict(peer).get(selector), f"spec.networkPolicy.ingress[{i}].{selector}"
            )
    resources = as_dict(spec.get("resources"))
    yield from k8s_validation.validate_resources(resources, "spec.resources")
    provider = as_dict(spec.get("provider"))
    yield from _base_url_errors(provider.get("baseURL"))
    if as_dict(spec.get("autoscaling")).get("enabled") is True and (
        "cpu" not in as_dict(resources.get("requests"))
    ):
        yield FieldError(
            "spec.autoscaling.enabled",
            "autoscaling needs spec.resources.requests.cpu: CPU utilization is measured "
            "against the CPU request",
            "FieldValueRequired",
        )
    if model is not None:
        problem = k8s_validation.image_reference_problem(render_image(model.image))
        if problem:
            yield FieldError(
                "spec.image.repository",
                f"{render_image(model.image)!r} is not a valid image reference: {problem}",
            )


def _bounded(value: Any, loc: tuple[int | str, ...], errors: list[FieldError]) -> Any:
    """`value` with every map and list cut to MAX_COLLECTION_ENTRIES, one error per cut."""
    if not isinstance(value, dict | list):
        return value
    if len(value) > MAX_COLLECTION_ENTRIES:
        errors.append(
            FieldError(
                _field_path(loc),
                f"must have at most {MAX_COLLECTION_ENTRIES} entries, has {len(value)} "
                f"(only the first {MAX_COLLECTION_ENTRIES} were checked)",
                "FieldValueTooMany",
            )
        )
    if isinstance(value, dict):
        entries = islice(value.items(), MAX_COLLECTION_ENTRIES)
        return {key: _bounded(item, (*loc, key), errors) for key, item in entries}
    entries = islice(enumerate(value), MAX_COLLECTION_ENTRIES)
    return [_bounded(item, (*loc, i), errors) for i, item in entries]


def _name_errors(obj: Mapping[str, Any]) -> list[FieldError]:
    """CONTRACT section 11: the name must fit every managed object's name and label value."""
    name = k8s_validation.as_dict(obj.get("metadata")).get("name")
    if not isinstance(name, str) or not name:
        return []  # generateName: the API server sets the name before validation
    return [
        FieldError(
            "metadata.name",
            f"invalid runtime name {shown(name)}: {problem}; the operator names the runtime's "
            f"Service and other objects after it and puts it in their {constants.LABEL_INSTANCE} "
            "label",
        )
        for problem in k8s_validation.dns_1035_label_problems(name)
    ]


def _errors(obj: Mapping[str, Any]) -> tuple[list[FieldError], TrussiumRuntimeSpec | None]:
    errors = _name_errors(obj)
    if "spec" in obj:
        obj = {**obj, "spec": _bounded(obj["spec"], (), errors)}
    defaulted = apply_defaults(obj).object
    model, schema = _spec_model(defaulted)
    reported = {e.path for e in errors}
    errors += [e for e in schema if e.path not in reported]
    reported |= {e.path for e in schema}
    spec = k8s_validation.as_dict(defaulted.get("spec"))
    errors += [e for e in _semantic_errors(spec, model) if e.path not in reported]
    return errors, model


def _warnings(
    obj: Mapping[str, Any], model: TrussiumRuntimeSpec, existing_secrets: frozenset[str] | None
) -> Iterator[FieldError]:
    if model.image.tag == MUTABLE_TAG and model.image.digest is None:
        yield FieldError(
            "spec.image.tag",
            f"the mutable tag {MUTABLE_TAG!r} makes rollouts unreproducible; "
            "pin a version tag or a digest",
        )
    raw_replicas = k8s_validation.as_dict(obj.get("spec")).get("replicas")
    default_replicas = TrussiumRuntimeSpec.model_fields["replicas"].default
    if (
        model.autoscaling
        and model.autoscaling.enabled
        and raw_replicas not in (None, default_replicas)
    ):
        yield FieldError(
            "spec.replicas",
            "ignored while spec.autoscaling.enabled is true; the autoscaler owns the replica count",
        )
    if existing_secrets is not None:
        for name, path in referenced_secret_paths(model).items():
            if name not in existing_secrets:
                yield FieldError(
                    path,
                    f"Secret {shown(name)} does not exist in this namespace yet; the runtime is "
                    "not deployed until it does",
                )


def validate_runtime(
    obj: object, old: object = None, *, existing_secrets: frozenset[str] | None = None
) -> ValidationResult:
    """All violations of `obj` at once, plus warnings; never raises on JSON input.

    With `old` (UPDATE), an error already present in `old` with the same
    path and message is demoted to a warning.
    """
    if not isinstance(obj, Mapping):
        return ValidationResult(schema_errors(obj))
    problem = json_problem(obj)
    if problem is not None:
        return ValidationResult((FieldError(problem.path, problem.message),))
    errors, model = _errors(obj)
    warnings = list(_warnings(obj, model, existing_secrets)) if model else []
    if isinstance(old, Mapping) and json_problem(old) is None:
        preexisting = {(e.path, e.message) for e in _errors(old)[0]}
        warnings += [
            FieldError(
                e.path, f"{e.message} (already present before this update, so not blocking it)"
            )
            for e in errors
            if (e.path, e.message) in preexisting
        ]
        errors = [e for e in errors if (e.path, e.message) not in preexisting]
    return ValidationResult(tuple(errors), tuple(warnings))
