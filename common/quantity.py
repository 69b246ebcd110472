"""Kubernetes resource quantities: syntax, value and comparison.

The grammar is Kubernetes' own (k8s.io/apimachinery resource.Quantity), so a
quantity accepted here is one the API server accepts in a Pod:

    quantity ::= [+-] number suffix
    number   ::= digits | digits. | digits.digits | .digits
    suffix   ::= "" | n u m k M G T P E | Ki Mi Gi Ti Pi Ei | (e|E) [+-] digits

Values are exact `Decimal`s, so `1Gi > 1G` and `500m == 0.5` compare right.
"""

import re
from decimal import Context, Decimal

QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)

_GRAMMAR = re.compile(
    r"(?P<number>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?P<suffix>[KMGTPE]i|[numkMGTPE]|[eE][+-]?[0-9]+)?\Z"
)
_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
# Wide enough that binary multipliers of any realistic quantity stay exact.
_EXACT = Context(prec=200, Emax=10**9, Emin=-(10**9))


class QuantityError(ValueError):
    """A value that is not a Kubernetes quantity."""


def parse_quantity(value: object) -> Decimal:
    """The exact value of a quantity given as a JSON integer or string."""
    if isinstance(value, bool):
        raise QuantityError("must be a quantity such as 500m, 2Gi or 1")
    if isinstance(value, int):
        return Decimal(value)
    if not isinstance(value, str):
        raise QuantityError("must be a quantity such as 500m, 2Gi or 1")
    match = _GRAMMAR.match(value)
    if match is None:
        raise QuantityError(
            f"{value!r} is not a quantity: expected a number with an optional suffix "
            "(m, k, M, G, Ki, Mi, Gi, ... or an integer exponent like e3), e.g. 500m or 2Gi"
        )
    number = Decimal(match["number"])
    suffix = match["suffix"] or ""
    if suffix in _BINARY:
        return _EXACT.multiply(number, Decimal(2) ** _BINARY[suffix])
    if suffix in _DECIMAL:
        return number.scaleb(_DECIMAL[suffix], _EXACT)
    if suffix:
        exponent = int(suffix[1:])
        if abs(exponent) > 10**6:
            raise QuantityError(f"{value!r} is out of range: exponent too large")
        return number.scaleb(exponent, _EXACT)
    return number


def is_integer(value: Decimal) -> bool:
    """Whether a quantity is a whole number (extended resources must be)."""
    return value == value.to_integral_value()
