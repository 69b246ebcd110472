"""Kubernetes' own syntax rules for the types a TrussiumRuntime embeds.

Ports of k8s.io/apimachinery and k8s.io/kubernetes validation (label keys
and values, annotations, label selectors, tolerations, affinity, resource
requirements, image references), so a runtime the webhook admits never
fails later when the operator applies its Deployment. Every function takes
raw JSON values and skips parts of the wrong type: the schema reports those.
"""

import dataclasses
import ipaddress
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from trussium_operator.common.json_limits import cut, path_key, shown
from trussium_operator.common.quantity import QuantityError, is_integer, parse_quantity


@dataclass(frozen=True)
class FieldError:
    """One violation at a Kubernetes-style field path (a StatusCause).

    `rule` names the rule broken (`common.rules`), set by whoever checks it for
    the TrussiumRuntime; a stored runtime may break those named by a
    `TolerableRule` and still be reconciled (`common.ratcheting`). It takes
    no part in comparisons: a path and a message identify a violation.
    """

    path: str
    message: str
    type: str = "FieldValueInvalid"
    rule: str = dataclasses.field(default="", compare=False)


Errors = Iterator[FieldError]

_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]\Z")
_DNS_1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?\Z")
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")
NAME_HINT = (
    "alphanumeric characters, '-', '_' or '.', starting and ending with an alphanumeric character"
)
ANNOTATIONS_MAX_BYTES = 256 * 1024


def _key(path: str, key: object) -> str:
    return f"{path}{path_key(key)}"


def _at(path: str, index: int) -> str:
    return f"{path}[{index}]"


def as_dict(value: object) -> Mapping[str, Any]:
    if type(value) is dict:  # the common case, without the slower abstract-class check
        return value
    return value if isinstance(value, Mapping) else {}


def as_list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def dns_subdomain_problems(value: str) -> list[str]:
    if len(value) > 253:
        return ["must be no more than 253 characters"]
    if not _DNS_SUBDOMAIN.match(value):
        return [
            "must be a lowercase RFC 1123 subdomain: lowercase alphanumeric characters, '-' "
            "or '.', starting and ending with an alphanumeric character (e.g. example.com)"
        ]
    return []


def dns_1035_label_problems(value: str) -> list[str]:
    """Why `value` is not a DNS-1035 label, as IsDNS1035Label says (a Service name)."""
    if len(value) > 63:
        return ["must be no more than 63 characters"]
    if not _DNS_1035_LABEL.match(value):
        return [
            "must be a DNS-1035 label: lowercase letters, digits and '-', starting with a "
            "letter and ending with a letter or digit (e.g. my-name)"
        ]
    return []


def qualified_name_problems(value: str) -> list[str]:
    """Why `value` is not a qualified name ([prefix/]name), as IsQualifiedName says."""
    prefix, slash, name = value.rpartition("/")
    if slash and not prefix:
        return ["prefix part must be non-empty"]
    if "/" in prefix:
        return [
            "must be a name with an optional DNS subdomain prefix and '/' (e.g. example.com/name)"
        ]
    problems = [f"prefix part {p}" for p in dns_subdomain_problems(prefix)] if prefix else []
    if not name:
        problems.append("name part must be non-empty")
    elif len(name) > 63:
        problems.append("name part must be no more than 63 characters")
    elif not _NAME.match(name):
        problems.append(f"name part must consist of {NAME_HINT}")
    return problems


def label_value_problems(value: str) -> list[str]:
    if len(value) > 63:
        return ["must be no more than 63 characters"]
    if value and not _NAME.match(value):
        return [f"a label value must be empty or consist of {NAME_HINT}"]
    return []


def _key_errors(path: str, key: str, what: str) -> Errors:
    for problem in qualified_name_problems(key):
        yield FieldError(path, f"invalid {what} {shown(key)}: {problem}")


def validate_labels(labels: object, path: str, what: str = "label key") -> Errors:
    for key, value in as_dict(labels).items():
        yield from _key_errors(_key(path, key), str(key), what)
        if isinstance(value, str):
            for problem in label_value_problems(value):
                yield FieldError(_key(path, key), f"invalid label value {shown(value)}: {problem}")


def validate_annotations(annotations: object, path: str) -> Errors:
    size = 0
    for key, value in as_dict(annotations).items():
        yield from _key_errors(_key(path, key), str(key).lower(), "annotation key")
        size += len(str(key).encode()) + (len(value.encode()) if isinstance(value, str) else 0)
    if size > ANNOTATIONS_MAX_BYTES:
        yield FieldError(
            path,
            f"annotations must have at most {ANNOTATIONS_MAX_BYTES} bytes in total",
            "FieldValueTooLong",
        )


def cidr_problem(value: str) -> str | None:
    """Why `value` is not a CIDR in canonical form (stricter than IsValidCIDR, which also
    takes host bits and padding): one spelling per range, so nothing is read two ways."""
    try:
        network = ipaddress.ip_network(value, strict=False)
    except ValueError:
        network = None
    if network is None or "/" not in value or "%" in value:
        return "must be a CIDR, e.g. 10.0.0.0/8 or 2001:db8::/32"
    if str(network) != value:
        return f"must be a CIDR in canonical form, without host bits: {network}"
    return None


def _validate_values_for_operator(
    requirement: Mapping[str, Any], path: str, extra_operators: tuple[str, ...] = ()
) -> Errors:
    operator = requirement.get("operator")
    values = as_list(requirement.get("values"))
    if operator in ("In", "NotIn"):
        if not values:
            yield FieldError(
                f"{path}.values",
                "must be specified when `operator` is 'In' or 'NotIn'",
                "FieldValueRequired",
            )
    elif operator in ("Exists", "DoesNotExist"):
        if values:
            yield FieldError(
                f"{path}.values",
                "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                "FieldValueForbidden",
            )
    elif operator in extra_operators:
        if len(values) != 1:
            yield FieldError(
                f"{path}.values",
                "must be a single value when `operator` is 'Gt' or 'Lt'",
                "FieldValueRequired",
            )
        elif not (isinstance(values[0], str) and re.fullmatch(r"[+-]?[0-9]+", values[0])):
            yield FieldError(_at(f"{path}.values", 0), "must be an integer for 'Gt' and 'Lt'")
    elif isinstance(operator, str):
        supported = ", ".join(("In", "NotIn", "Exists", "DoesNotExist", *extra_operators))
        yield FieldError(
            f"{path}.operator",
            f"unsupported operator {shown(operator)}: supported values: {supported}",
            "FieldValueNotSupported",
        )
    if isinstance(requirement.get("key"), str):
        yield from _key_errors(f"{path}.key", requirement["key"], "key")


def validate_label_selector(selector: object, path: str) -> Errors:
    selector = as_dict(selector)
    for i, requirement in enumerate(as_list(selector.get("matchExpressions"))):
        at = _at(f"{path}.matchExpressions", i)
        requirement = as_dict(requirement)
        yield from _validate_values_for_operator(requirement, at)
        for j, value in enumerate(as_list(requirement.get("values"))):
            if isinstance(value, str):
                for problem in label_value_problems(value):
                    yield FieldError(
                        _at(f"{at}.values", j), f"invalid label value {shown(value)}: {problem}"
                    )
    yield from validate_labels(selector.get("matchLabels"), f"{path}.matchLabels")


def validate_tolerations(tolerations: object, path: str) -> Errors:
    for i, toleration in enumerate(as_list(tolerations)):
        at, toleration = _at(path, i), as_dict(toleration)
        key, operator = toleration.get("key") or "", toleration.get("operator") or ""
        value, effect = toleration.get("value") or "", toleration.get("effect") or ""
        if key and isinstance(key, str):
            yield from _key_errors(f"{at}.key", key, "key")
        if not key and operator != "Exists":
            yield FieldError(
                f"{at}.operator",
                'operator must be Exists when `key` is empty, which means "match all values '
                'and all keys"',
            )
        if toleration.get("tolerationSeconds") is not None and effect != "NoExecute":
            yield FieldError(
                f"{at}.effect", "effect must be 'NoExecute' when `tolerationSeconds` is set"
            )
        if operator in ("", "Equal"):
            if isinstance(value, str):
                for problem in label_value_problems(value):
                    yield FieldError(f"{at}.value", f"invalid value {shown(value)}: {problem}")
        elif operator == "Exists":
            if value:
                yield FieldError(f"{at}.value", "value must be empty when `operator` is 'Exists'")
        else:
            yield FieldError(
                f"{at}.operator",
                f"unsupported operator {shown(operator)}: supported values: Equal, Exists",
                "FieldValueNotSupported",
            )
        if effect not in ("", "NoSchedule", "PreferNoSchedule", "NoExecute"):
            yield FieldError(
                f"{at}.effect",
                f"unsupported effect {shown(effect)}: supported values: NoSchedule, "
                "PreferNoSchedule, NoExecute",
                "FieldValueNotSupported",
            )


def _validate_weight(weight: object, path: str) -> Errors:
    if isinstance(weight, int) and not 1 <= weight <= 100:
        yield FieldError(path, "must be in the range 1-100")


def _validate_node_selector_term(term: object, path: str) -> Errors:
    term = as_dict(term)
    for i, requirement in enumerate(as_list(term.get("matchExpressions"))):
        yield from _validate_values_for_operator(
            as_dict(requirement), _at(f"{path}.matchExpressions", i), ("Gt", "Lt")
        )
    for i, requirement in enumerate(as_list(term.get("matchFields"))):
        at, requirement = _at(f"{path}.matchFields", i), as_dict(requirement)
        values = as_list(requirement.get("values"))
        if requirement.get("operator") not in ("In", "NotIn"):
            yield FieldError(
                f"{at}.operator",
                "unsupported operator for a node field selector: supported values: In, NotIn",
                "FieldValueNotSupported",
            )
        elif len(values) != 1:
            yield FieldError(
                f"{at}.values",
                "must be only one value when `operator` is 'In' or 'NotIn' for node field selector",
                "FieldValueRequired",
            )
        if requirement.get("key") != "metadata.name":
            yield FieldError(f"{at}.key", "not a valid field selector key: only metadata.name")
        for j, value in enumerate(values):
            if isinstance(value, str):
                for problem in dns_subdomain_problems(value):
                    yield FieldError(
                        _at(f"{at}.values", j), f"invalid node name {shown(value)}: {problem}"
                    )


def _validate_pod_affinity_term(term: object, path: str) -> Errors:
    term = as_dict(term)
    yield from validate_label_selector(term.get("labelSelector"), f"{path}.labelSelector")
    yield from validate_label_selector(term.get("namespaceSelector"), f"{path}.namespaceSelector")
    for i, namespace in enumerate(as_list(term.get("namespaces"))):
        if isinstance(namespace, str) and (len(namespace) > 63 or not _DNS_LABEL.match(namespace)):
            yield FieldError(
                _at(f"{path}.namespaces", i),
                f"invalid namespace name {shown(namespace)}: must be a lowercase RFC 1123 label",
            )
    match_keys = as_list(term.get("matchLabelKeys"))
    mismatch_keys = as_list(term.get("mismatchLabelKeys"))
    for field, keys in (("matchLabelKeys", match_keys), ("mismatchLabelKeys", mismatch_keys)):
        if keys and term.get("labelSelector") is None:
            yield FieldError(
                f"{path}.{field}",
                "must not be specified when labelSelector is not set",
                "FieldValueForbidden",
            )
        for i, key in enumerate(keys):
            if isinstance(key, str):
                yield from _key_errors(_at(f"{path}.{field}", i), key, "label key")
    for i, key in enumerate(mismatch_keys):
        if key in match_keys:
            yield FieldError(
                _at(f"{path}.mismatchLabelKeys", i),
                f"{shown(key)} exists in both matchLabelKeys and mismatchLabelKeys",
            )
    topology_key = term.get("topologyKey")
    if topology_key == "":
        yield FieldError(f"{path}.topologyKey", "can not be empty", "FieldValueRequired")
    elif isinstance(topology_key, str):
        yield from _key_errors(f"{path}.topologyKey", topology_key, "topology key")


def _validate_pod_affinity(affinity: object, path: str) -> Errors:
    affinity = as_dict(affinity)
    required = "requiredDuringSchedulingIgnoredDuringExecution"
    preferred = "preferredDuringSchedulingIgnoredDuringExecution"
    for i, term in enumerate(as_list(affinity.get(required))):
        yield from _validate_pod_affinity_term(term, _at(f"{path}.{required}", i))
    for i, weighted in enumerate(as_list(affinity.get(preferred))):
        at, weighted = _at(f"{path}.{preferred}", i), as_dict(weighted)
        yield from _validate_weight(weighted.get("weight"), f"{at}.weight")
        yield from _validate_pod_affinity_term(
            weighted.get("podAffinityTerm"), f"{at}.podAffinityTerm"
        )


def validate_affinity(affinity: object, path: str) -> Errors:
    affinity = as_dict(affinity)
    node = as_dict(affinity.get("nodeAffinity"))
    node_path = f"{path}.nodeAffinity"
    required = "requiredDuringSchedulingIgnoredDuringExecution"
    preferred = "preferredDuringSchedulingIgnoredDuringExecution"
    if isinstance(node.get(required), Mapping):
        terms = node[required].get("nodeSelectorTerms")
        terms_path = f"{node_path}.{required}.nodeSelectorTerms"
        if isinstance(terms, list) and not terms:
            yield FieldError(
                terms_path, "must have at least one node selector term", "FieldValueRequired"
            )
        for i, term in enumerate(as_list(terms)):
            yield from _validate_node_selector_term(term, _at(terms_path, i))
    for i, weighted in enumerate(as_list(node.get(preferred))):
        at, weighted = _at(f"{node_path}.{preferred}", i), as_dict(weighted)
        yield from _validate_weight(weighted.get("weight"), f"{at}.weight")
        yield from _validate_node_selector_term(weighted.get("preference"), f"{at}.preference")
    yield from _validate_pod_affinity(affinity.get("podAffinity"), f"{path}.podAffinity")
    yield from _validate_pod_affinity(affinity.get("podAntiAffinity"), f"{path}.podAntiAffinity")


_STANDARD_RESOURCES = ("cpu", "memory", "ephemeral-storage")
HUGEPAGES_PREFIX = "hugepages-"


def _is_native(name: str) -> bool:
    return "/" not in name or "kubernetes.io/" in name


def _overcommit_allowed(name: str) -> bool:
    """Native resources other than huge pages may be requested below their limit."""
    return _is_native(name) and not name.startswith(HUGEPAGES_PREFIX)


def _resource_name_problems(name: str) -> list[str]:
    problems = qualified_name_problems(name)
    if problems:
        return problems
    if "/" not in name:
        if name not in _STANDARD_RESOURCES and not name.startswith(HUGEPAGES_PREFIX):
            return [
                "must be a standard resource for containers (cpu, memory, ephemeral-storage, "
                "hugepages-<size>) or an extended resource <domain>/<name>"
            ]
    elif not _is_native(name) and (
        name.startswith("requests.") or qualified_name_problems(f"requests.{name}")
    ):
        return ["doesn't follow the extended resource name standard (<domain>/<name>)"]
    return []


def _hugepage_size(name: str) -> Decimal | None:
    try:
        size = parse_quantity(name.removeprefix(HUGEPAGES_PREFIX))
    except QuantityError:
        return None
    return size if size > 0 else None


def _quantity_errors(
    name: str, value: object, path: str
) -> tuple[Decimal | None, list[FieldError]]:
    try:
        quantity = parse_quantity(value)
    except QuantityError as error:
        return None, [FieldError(path, str(error))]
    if quantity < 0:
        return quantity, [FieldError(path, "must be greater than or equal to 0")]
    if not _is_native(name) and not is_integer(quantity):
        return quantity, [FieldError(path, "must be an integer (extended resources are counted)")]
    if name.startswith(HUGEPAGES_PREFIX):
        size = _hugepage_size(name)
        if size is None:
            return quantity, [FieldError(path, f"{name} does not name a valid huge page size")]
        if not is_integer(quantity / size):
            return quantity, [
                FieldError(
                    path,
                    f"{shown(value)} is not a positive integer multiple of the page size "
                    f"{name.removeprefix(HUGEPAGES_PREFIX)}",
                )
            ]
    return quantity, []


def validate_resources(resources: object, path: str) -> Errors:
    resources = as_dict(resources)
    limits: dict[str, Decimal | None] = {}
    for kind in ("limits", "requests"):
        for name, value in as_dict(resources.get(kind)).items():
            at = _key(f"{path}.{kind}", name)
            for problem in _resource_name_problems(str(name)):
                yield FieldError(at, f"invalid resource name {shown(name)}: {problem}")
            quantity, errors = _quantity_errors(str(name), value, at)
            yield from errors
            if kind == "limits":
                limits[name] = quantity
                continue
            if name not in limits:
                if not _overcommit_allowed(str(name)):
                    yield FieldError(
                        _key(f"{path}.limits", name),
                        "Limit must be set for non overcommitable resources",
                        "FieldValueRequired",
                    )
                continue
            limit = limits[name]
            if quantity is None or limit is None:
                continue
            if not _overcommit_allowed(str(name)) and quantity != limit:
                yield FieldError(
                    at, f"must be equal to {name} limit of {cut(resources['limits'][name])}"
                )
            elif quantity > limit:
                limit_text = cut(resources["limits"][name])
                yield FieldError(at, f"must be less than or equal to {name} limit of {limit_text}")
    names = set(limits) | set(as_dict(resources.get("requests")))
    if any(str(n).startswith(HUGEPAGES_PREFIX) for n in names) and not names & {"cpu", "memory"}:
        yield FieldError(path, "HugePages require cpu or memory", "FieldValueForbidden")
    yield from _validate_claims(resources.get("claims"), f"{path}.claims")


def _validate_claims(claims: object, path: str) -> Errors:
    """As Kubernetes validates a container's claims: both names are DNS labels."""
    for i, claim in enumerate(as_list(claims)):
        for field in ("name", "request"):
            value = as_dict(claim).get(field)
            if (
                isinstance(value, str)
                and value
                and (len(value) > 63 or not _DNS_LABEL.match(value))
            ):
                yield FieldError(
                    f"{_at(path, i)}.{field}",
                    f"invalid value {value!r}: must be a lowercase RFC 1123 label (at most 63 "
                    "lowercase alphanumeric characters or '-', starting and ending with an "
                    "alphanumeric character)",
                )


# The grammar of github.com/distribution/reference, which the kubelet parses images with.
_ALNUM = r"[a-z0-9]+"
_SEPARATOR = r"(?:[._]|__|[-]+)"
_PATH_COMPONENT = rf"{_ALNUM}(?:{_SEPARATOR}{_ALNUM})*"
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|\[[a-fA-F0-9:]+\])(?::[0-9]+)?"
_IMAGE_NAME = re.compile(rf"(?:{_DOMAIN}/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*\Z")
_IMAGE_TAG = re.compile(r"[\w][\w.-]{0,127}\Z", re.ASCII)
_IMAGE_DIGEST = re.compile(
    r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9A-Fa-f]{32,}\Z"
)


def image_reference_problem(reference: str) -> str | None:
    """Why `reference` is not an image reference the kubelet can pull, or None."""
    name, at, digest = reference.partition("@")
    if ":" in name.rpartition("/")[2]:
        name, _, tag = name.rpartition(":")
    else:
        tag = None
    if len(name) > 255:
        return "the repository name must be at most 255 characters"
    if not _IMAGE_NAME.match(name):
        return (
            "the repository must be lowercase path components separated by '/', optionally "
            "prefixed by a registry host[:port] (e.g. ghcr.io/trussium/runtime)"
        )
    if tag is not None and not _IMAGE_TAG.match(tag):
        return f"invalid tag {shown(tag)}"
    if at and not _IMAGE_DIGEST.match(digest):
        return f"invalid digest {shown(digest)}"
    return None
