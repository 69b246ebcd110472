"""One parse of a TrussiumRuntime object, which every later step reads.

`parse_runtime` bounds the spec's collections, applies the CRD's defaults to
it in memory and parses it into the models of `common.api`, translating what
the models reject into Kubernetes-style field errors: the CRD schema's
verdict, so the offline validator and a cluster without the webhook agree.
Validation (`common.validation`), the webhook and the reconciler take what it
yields (the spec model, a `TrussiumRuntime` for rendering and status, the
metadata and the status as plain data) instead of parsing again.

The spec is defaulted here although the API server already defaults on
decode and on every read: an offline file never met an API server, and a
runtime stored and served under an older CRD (Helm never upgrades a chart's
CRDs) lacks the defaults the current API promises.
"""

import types
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from itertools import islice
from typing import Any, Union

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from trussium_operator.common import api
from trussium_operator.common.api import (
    STORED_RUNTIME,
    RuleViolationError,
    TrussiumRuntime,
    TrussiumRuntimeSpec,
)
from trussium_operator.common.defaulting import JSON_CONTAINERS, default_spec
from trussium_operator.common.json_limits import MAX_DEPTH, json_problem, path_key, shown
from trussium_operator.common.k8s_types import MaxEntries
from trussium_operator.common.k8s_validation import FieldError
from trussium_operator.common.quantity import QuantityError, parse_quantity
from trussium_operator.common.ratcheting import TolerableRule, tolerated
from trussium_operator.common.rules import Rule

# Entries the operator reads of any map or list of a spec: the bound of a collection
# the models do not bound (`MaxEntries`), and how far a stored runtime's bounded
# collection is read (its bound did not exist when it was stored).
MAX_COLLECTION_ENTRIES = 1000

_PATTERN_HINTS = {
    api.DNS_SUBDOMAIN_PATTERN: "a lowercase RFC 1123 subdomain (lowercase letters, digits, "
    "'-' and '.', starting and ending with a letter or digit)",
    api.IMAGE_REPOSITORY_PATTERN: "letters, digits and '.', '_', ':', '/', '-', starting with "
    "a letter or digit",
    api.IMAGE_TAG_PATTERN: "letters, digits, '_', '.' and '-', not starting with '.' or '-'",
    api.IMAGE_DIGEST_PATTERN: "sha256: followed by 64 lowercase hexadecimal digits",
    api.SECRET_KEY_PATTERN: "letters, digits, '.', '_' and '-'",
    api.TRIMMED_PATTERN: "a name without leading or trailing whitespace",
}
_TYPE_NAMES = {
    "int_type": "an integer",
    "float_type": "a number",
    "string_type": "a string",
    "bool_type": "a boolean",
    "dict_type": "an object",
    "model_type": "an object",
    "model_attributes_type": "an object",
    "list_type": "a list",
}


_QUANTITY_PATHS = ("spec.resources.limits[", "spec.resources.requests[", "spec.scratch.sizeLimit")
_QUANTITY_FAILURES = ("int_type", "string_type", "string_pattern_mismatch")
_NOT_AN_OBJECT = FieldError(
    "", "a TrussiumRuntime must be a JSON object", "FieldValueTypeInvalid", Rule.FIELD_TYPE
)


@dataclass(frozen=True)
class ParsedRuntime:
    """A TrussiumRuntime object as one parse saw it.

    `spec` is None when the object could not be read at all (not a JSON
    object, nested too deep, not valid Unicode); `errors` then say why.
    `model` is None when the spec breaks a schema rule (`errors` list each)
    other than those a stored runtime may break (`common.ratcheting`);
    `runtime` is None when the model is, or when the metadata cannot carry a
    runtime (`runtime_problem` says why: no name, a field of the wrong type).
    """

    errors: tuple[FieldError, ...]
    metadata: Mapping[str, Any] = field(default_factory=dict)
    spec: Mapping[str, Any] | None = None
    status: Mapping[str, Any] | None = None
    model: TrussiumRuntimeSpec | None = None
    runtime: TrussiumRuntime | None = None
    runtime_problem: str = ""


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


def _bound(tp: Any, metadata: Iterable[object] = ()) -> int | None:
    """The `MaxEntries` count an annotation (or a field's metadata) declares, if any."""
    while typing.get_origin(tp) in (typing.Annotated, Union, types.UnionType):
        args = typing.get_args(tp)
        if typing.get_origin(tp) is typing.Annotated:
            metadata = (*metadata, *args[1:])
        tp = next((a for a in args if a is not type(None)), None)
    return next((m.count for m in metadata if isinstance(m, MaxEntries)), None)


# Annotation -> (kind, element type or field map: alias -> (type, bound)); the models
# are fixed, so each annotation is worked out once (keyed by identity: annotations
# need not be hashable).
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
        fields = {
            f.alias or name: (_unwrap(f.annotation), _bound(f.annotation, f.metadata))
            for name, f in tp.model_fields.items()
        }
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
            path, tp = f"{path}.{item}", inner.get(str(item), (None,))[0]
        else:
            break  # a union variant tag, or below a scalar
    return path


def _number(bound: object) -> object:
    """A bound as the schema states it: 2, not the 2.0 a decimal field's check holds."""
    return int(bound) if isinstance(bound, float) and bound.is_integer() else bound


def _schema_error(error: ErrorDetails) -> FieldError:
    kind, ctx, value = error["type"], error.get("ctx", {}), error.get("input")
    bounds = Rule.VALUE_BOUNDS
    path = _field_path(error["loc"])
    if path.startswith(_QUANTITY_PATHS) and kind in _QUANTITY_FAILURES:
        try:
            parse_quantity(value)
        except QuantityError as problem:
            return FieldError(path, str(problem), rule=Rule.QUANTITY)
    if kind == "missing":
        return FieldError(path, "Required value", "FieldValueRequired", Rule.REQUIRED_VALUE)
    if kind == "extra_forbidden":
        name = error["loc"][-1]
        return FieldError(
            path,
            f"unknown field {shown(name)}: not part of the TrussiumRuntime API "
            "(see docs/api-reference.md)",
            "FieldValueForbidden",
            Rule.UNKNOWN_FIELD,
        )
    if kind == "string_too_short":
        return FieldError(path, "must not be empty", "FieldValueRequired", Rule.REQUIRED_VALUE)
    if kind == "string_too_long":
        return FieldError(
            path,
            f"must be at most {ctx['max_length']} characters",
            "FieldValueTooLong",
            Rule.VALUE_BOUNDS,
        )
    if kind == "too_long":
        return FieldError(
            path,
            f"must have at most {ctx['max_length']} items",
            "FieldValueTooMany",
            Rule.VALUE_BOUNDS,
        )
    if kind == "string_pattern_mismatch":
        hint = _PATTERN_HINTS.get(ctx["pattern"], f"matching {ctx['pattern']}")
        return FieldError(path, f"invalid value {shown(value)}: must be {hint}", rule=bounds)
    if kind == "greater_than_equal":
        return FieldError(
            path, f"must be greater than or equal to {_number(ctx['ge'])}", rule=bounds
        )
    if kind == "less_than_equal":
        return FieldError(path, f"must be less than or equal to {_number(ctx['le'])}", rule=bounds)
    if kind == "greater_than":
        return FieldError(path, f"must be greater than {_number(ctx['gt'])}", rule=bounds)
    if kind == "less_than":
        return FieldError(path, f"must be less than {_number(ctx['lt'])}", rule=bounds)
    if kind == "literal_error":
        return FieldError(
            path,
            f"unsupported value {shown(value)}: supported values: {ctx['expected']}",
            "FieldValueNotSupported",
            Rule.SUPPORTED_VALUES,
        )
    if kind in _TYPE_NAMES:
        return FieldError(
            path, f"must be {_TYPE_NAMES[kind]}", "FieldValueTypeInvalid", Rule.FIELD_TYPE
        )
    if kind == "value_error":
        cause = ctx["error"]
        rule = cause.rule.name if isinstance(cause, RuleViolationError) else bounds
        return FieldError(path, str(cause), rule=rule)
    return FieldError(path, error["msg"], rule=bounds)


def _one_per_path(errors: list[FieldError]) -> list[FieldError]:
    """Pydantic reports each failed variant of `int | str` (quantities); keep the first."""
    seen: dict[str, FieldError] = {}
    for error in errors:
        seen.setdefault(error.path, error)
    return list(seen.values())


def _spec_model(spec: object) -> tuple[TrussiumRuntimeSpec | None, list[FieldError]]:
    """The model of a defaulted spec, and the schema rules it breaks.

    When it breaks only rules a stored runtime may break (`common.ratcheting`),
    the model is built too, as a stored runtime's: the errors still say what it breaks.
    """
    if spec is None:
        return None, [
            FieldError("spec", "Required value", "FieldValueRequired", Rule.REQUIRED_VALUE)
        ]
    try:
        return TrussiumRuntimeSpec.model_validate(spec), []
    except ValidationError as error:
        errors = _one_per_path([_schema_error(e) for e in error.errors()])
    if not all(tolerated(e) for e in errors):
        return None, errors
    try:
        return TrussiumRuntimeSpec.model_validate(spec, context=STORED_RUNTIME), errors
    except ValidationError:  # a rule hidden behind a tolerated one at the same path
        return None, errors


def _defaulted(spec: object) -> object:
    """A spec's defaulted form; null counts as absent, as the API server prunes it."""
    return None if spec is None else default_spec(spec)


def schema_errors(obj: object) -> tuple[FieldError, ...]:
    """The violations the CRD schema itself rejects (after the API server's defaulting).

    The schema alone, as the API server applies it, which the differential
    tests compare it with: each collection is counted against its bound
    (`maxItems`, `maxProperties`) but read as a stored runtime's is.
    """
    if not isinstance(obj, Mapping):
        return (_NOT_AN_OBJECT,)
    errors: list[FieldError] = []
    spec = _bounded(obj.get("spec"), TrussiumRuntimeSpec, None, (), errors, stored=True)
    counted = {e.path for e in errors}
    schema = _spec_model(_defaulted(spec))[1]
    return tuple(errors + [e for e in schema if e.path not in counted])


def _bounded(
    value: Any,
    tp: Any,
    bound: int | None,
    loc: tuple[int | str, ...],
    errors: list[FieldError],
    stored: bool,
) -> Any:
    """A copy of `value` with each map and list cut to its bound, one error per breach.

    A collection's bound is its model's `MaxEntries`, else MAX_COLLECTION_ENTRIES.
    For admission a collection is cut to its bound, so no rule reads further and a
    review costs what the bounds allow; a `stored` runtime's is read up to
    MAX_COLLECTION_ENTRIES, as the operator renders it whole (`common.ratcheting`).
    """
    if not isinstance(value, JSON_CONTAINERS) or len(loc) >= MAX_DEPTH:
        return value  # deeper: left whole for json_problem to report
    limit = bound or MAX_COLLECTION_ENTRIES
    if len(value) > limit:
        what = "items" if isinstance(value, list) else "entries"
        rule = (
            TolerableRule.TOO_MANY_ENTRIES
            if bound is not None and len(value) <= MAX_COLLECTION_ENTRIES
            else Rule.COLLECTION_TOO_LARGE
        )
        errors.append(
            FieldError(
                _field_path(loc),
                f"must have at most {limit} {what}, has {len(value)}",
                "FieldValueTooMany",
                rule,
            )
        )
    kept = MAX_COLLECTION_ENTRIES if stored else limit
    kind, inner = _step(tp) if tp is not None else ("scalar", {})
    fields: dict[str, tuple[Any, int | None]] = inner if kind == "model" else {}
    if isinstance(value, list):
        item = inner if kind == "list" else None
        entries = islice(enumerate(value), kept)
        return [
            _bounded(v, item, None, (*loc, i), errors, stored)
            if isinstance(v, JSON_CONTAINERS)
            else v
            for i, v in entries
        ]
    out = {}
    for key, v in islice(value.items(), kept):
        if not isinstance(v, JSON_CONTAINERS):  # a scalar has no bound: kept as it is
            out[key] = v
            continue
        if kind == "model":
            child, child_bound = fields.get(key, (None, None))
        else:
            child, child_bound = (inner if kind == "dict" else None), None
        out[key] = _bounded(v, child, child_bound, (*loc, key), errors, stored)
    return out


def over_bounds(obj: object) -> bool:
    """Whether a runtime's spec has a collection over its bound, which admission refuses
    (on an UPDATE, unless the old object had it too); costs what the bounds allow."""
    errors: list[FieldError] = []
    spec = obj.get("spec") if isinstance(obj, Mapping) else None
    _bounded(spec, TrussiumRuntimeSpec, None, (), errors, stored=False)
    return bool(errors)


def _runtime(
    metadata: object, model: TrussiumRuntimeSpec, status: Mapping[str, Any] | None
) -> tuple[TrussiumRuntime | None, str]:
    """The runtime rendering and status computation take; the spec model is reused as is."""
    try:
        runtime = TrussiumRuntime.model_validate(
            {"metadata": metadata, "spec": model, "status": status}
        )
    except ValidationError as error:
        return None, "; ".join(e["msg"] for e in error.errors(include_url=False))
    return runtime, ""


def parse_runtime(obj: object, *, stored: bool = False, sound: bool = False) -> ParsedRuntime:
    """The one parse of a TrussiumRuntime (a decoded JSON value); never raises on JSON input.

    `errors` holds the collections over their bound and the schema rules the
    defaulted spec breaks, one per path. For admission (and offline) each
    collection is cut to its bound first; `stored` reads a runtime already in
    the cluster as the controller does, each collection up to
    MAX_COLLECTION_ENTRIES (`_bounded`). The spec is copied before it is
    defaulted, so the result shares nothing mutable with `obj`'s spec;
    metadata and status are `obj`'s own. `sound`: the caller has already found
    all of `obj` within the JSON limits (`json_problem`), as `decode_review`
    does for a review's objects, so that pass is not repeated.
    """
    if not isinstance(obj, Mapping):
        return ParsedRuntime((_NOT_AN_OBJECT,))
    errors: list[FieldError] = []
    bounded = _bounded(obj.get("spec"), TrussiumRuntimeSpec, None, (), errors, stored)
    # What is read is checked: the spec as cut (nothing reads past a bound), the rest whole.
    problem = None if sound else json_problem({**obj, "spec": bounded} if "spec" in obj else obj)
    if problem is not None:
        return ParsedRuntime((FieldError(problem.path, problem.message, rule=Rule.JSON_LIMITS),))
    spec = _defaulted(bounded)
    model, schema = _spec_model(spec)
    cut = {e.path for e in errors}
    errors += [e for e in schema if e.path not in cut]
    metadata, status = obj.get("metadata"), obj.get("status")
    status = status if isinstance(status, dict) else None
    runtime, runtime_problem = _runtime(metadata, model, status) if model else (None, "")
    return ParsedRuntime(
        errors=tuple(errors),
        metadata=metadata if isinstance(metadata, Mapping) else {},
        spec=spec if isinstance(spec, Mapping) else {},
        status=status,
        model=model,
        runtime=runtime,
        runtime_problem=runtime_problem,
    )
