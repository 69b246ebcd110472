"""Defaulting of TrussiumRuntime objects, with the minimal JSONPatch producing it.

The defaults are read from the CRD schema (generated from `common.api`; the
part defaulting reads is kept in `common.defaulting_schema`, generated too, so
no program computes it at start-up) and applied with the API server's own
algorithm: a null field or map value is pruned, or gets the field's default if
it has one; an absent field with a default gets it; then every present value is
walked, so defaults nested in `service`, `autoscaling` and `networkPolicy` apply
exactly when their parent is present. The webhook, the controller and the
offline tools therefore default exactly as the API server does. Malformed input
(a non-object spec, a string where an object belongs) is left alone for
validation to report.
"""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from trussium_operator.common.defaulting_schema import SCHEMA


@dataclass(frozen=True)
class Defaulted:
    """The defaulted object and the RFC 6902 patch that turns the input into it."""

    object: dict[str, Any]
    patch: list[dict[str, Any]]


# What the JSON walks step into (here and `common.parsing`'s bounds); a tuple, which
# isinstance checks faster than `dict | list`.
JSON_CONTAINERS = (dict, list)


def copy_json(value: Any) -> Any:
    """A deep copy of a JSON tree (dicts, lists, scalars): several times faster
    than `copy.deepcopy`, which admission pays on every request."""
    if isinstance(value, dict):
        return {key: copy_json(item) for key, item in value.items()}
    if isinstance(value, list):
        return [copy_json(item) for item in value]
    return value


def json_pointer(path: Iterable[str | int]) -> str:
    """RFC 6901 pointer: `~` and `/` in keys escaped as `~0` and `~1`."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in path)


def _default(
    value: Any, schema: Mapping[str, Any], path: list[str | int], patch: list[dict[str, Any]]
) -> Any:
    """`value` with nulls pruned and defaults applied; appends one op per change to `patch`.

    Only maps and lists are walked into: a present scalar is returned as it is.
    """
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        out = dict(value)
        for key in [k for k, v in value.items() if v is None]:
            sub = properties.get(key, extra)
            if isinstance(sub, Mapping) and "default" not in sub:
                patch.append({"op": "remove", "path": json_pointer([*path, key])})
                del out[key]
        for key, sub in properties.items():
            if "default" in sub and out.get(key) is None:
                filled = _default(copy_json(sub["default"]), sub, [], [])
                op = "replace" if key in out else "add"
                patch.append({"op": op, "path": json_pointer([*path, key]), "value": filled})
                out[key] = filled
            elif sub and isinstance(out.get(key), JSON_CONTAINERS):
                # An empty schema (a leaf's) changes nothing below it; a scalar has no below.
                out[key] = _default(out[key], sub, [*path, key], patch)
        if extra:
            for key in [k for k, v in out.items() if isinstance(v, JSON_CONTAINERS)]:
                if key not in properties:
                    out[key] = _default(out[key], extra, [*path, key], patch)
        return out
    if isinstance(value, list) and "items" in schema:
        items = schema["items"]
        return [
            _default(v, items, [*path, i], patch) if isinstance(v, JSON_CONTAINERS) else v
            for i, v in enumerate(value)
        ]
    return value


_SPEC_SCHEMA = SCHEMA["properties"]["spec"]


def apply_defaults(obj: Mapping[str, Any]) -> Defaulted:
    """Apply the CRD defaults to a TrussiumRuntime (as a JSON dict), with the patch."""
    patch: list[dict[str, Any]] = []
    defaulted = _default(copy_json(dict(obj)), SCHEMA, [], patch)
    return Defaulted(object=defaulted, patch=patch)


_SPEC_ONLY = {"properties": {"spec": _SPEC_SCHEMA}}


def spec_patch(obj: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The patch that defaults a TrussiumRuntime's spec, for admission: no copy first.

    The spec is all that has defaults, so this is `apply_defaults(obj).patch` for any
    object the API server sends (it prunes nulls before admission), without walking
    metadata or status, which a review can fill with anything up to its size.
    """
    patch: list[dict[str, Any]] = []
    _default({"spec": obj["spec"]} if "spec" in obj else {}, _SPEC_ONLY, [], patch)
    return patch


def default_spec(spec: object) -> Any:
    """A spec with the CRD defaults, for reading: no patch, no copy first.

    `spec` itself is never changed, but the result shares its unchanged
    parts. Only the spec: metadata and status have no defaults.
    """
    return _default(spec, _SPEC_SCHEMA, [], [])
