"""Kubernetes resource quantities: syntax, value and comparison.

The grammar is Kubernetes' own (k8s.io/apimachinery resource.Quantity), so a
quantity accepted here is one the API server accepts in a Pod:

    quantity ::= [+-] number suffix
    number   ::= digits | digits. | digits.digits | .digits
    suffix   ::= "" | n u m k M G T P E | Ki Mi Gi Ti Pi Ei | (e|E) [+-] digits

Values are exact `Decimal`s, so `1Gi > 1G` and `500m == 0.5` compare right,
and bounded like Kubernetes' own, so a quantity accepted here can be applied.
"""

import re
from decimal import ROUND_UP, Context, Decimal

from trussium_operator.common.json_limits import shown

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


# Kubernetes counts a resource in int64 units of its base unit (resource.Quantity's
# Value()); a larger quantity saturates, so a page-size multiple stops being one.
MAX_QUANTITY = Decimal(2**63 - 1)
# An exponent of more digits than this already puts any non-zero number far
# outside the range above (or below a nano), without computing it.
_MAX_EXPONENT = 100
_NANO = Decimal("1e-9")


class QuantityError(ValueError):
    """A value that is not a Kubernetes quantity."""


def parse_quantity(value: object) -> Decimal:
    """The value of a quantity given as a JSON integer or string, as Kubernetes stores it.

    Like resource.ParseQuantity, a non-zero value is rounded up to a whole
    nano; beyond MAX_QUANTITY the quantity is refused as out of range.
    """
    if isinstance(value, bool):
        raise QuantityError("must be a quantity such as 500m, 2Gi or 1")
    if isinstance(value, int):
        return _in_range(Decimal(value), value)
    if not isinstance(value, str):
        raise QuantityError("must be a quantity such as 500m, 2Gi or 1")
    match = _GRAMMAR.match(value)
    if match is None:
        raise QuantityError(
            f"{shown(value)} is not a quantity: expected a number with an optional suffix "
            "(m, k, M, G, Ki, Mi, Gi, ... or an integer exponent like e3), e.g. 500m or 2Gi"
        )
    number = Decimal(match["number"])
    suffix = match["suffix"] or ""
    if suffix in _BINARY:
        return _in_range(_EXACT.multiply(number, Decimal(2) ** _BINARY[suffix]), value)
    exponent = _DECIMAL.get(suffix, 0)
    if suffix[:1] in ("e", "E") and len(suffix) > 1:
        digits = suffix[1:].lstrip("+-").lstrip("0")
        sign = -1 if suffix[1:2] == "-" else 1
        exponent = sign * _MAX_EXPONENT if len(digits) > 3 else int(suffix[1:])
    if number and number.adjusted() + exponent > _MAX_EXPONENT:
        raise _out_of_range(value)
    if number and number.adjusted() + exponent < -_MAX_EXPONENT:
        return _NANO.copy_sign(number)
    return _in_range(number.scaleb(exponent, _EXACT), value)


def _in_range(quantity: Decimal, given: object) -> Decimal:
    if abs(quantity) > MAX_QUANTITY:
        raise _out_of_range(given)
    if quantity == quantity.quantize(_NANO, context=_EXACT):
        return quantity
    return quantity.quantize(_NANO, rounding=ROUND_UP, context=_EXACT)


def _out_of_range(given: object) -> QuantityError:
    return QuantityError(
        f"{shown(given)} is out of range: Kubernetes counts resources in 64-bit integers, "
        f"so a quantity must be at most {MAX_QUANTITY} (2^63-1) of its base unit"
    )


def is_integer(value: Decimal) -> bool:
    """Whether a quantity is a whole number (extended resources must be)."""
    return value == value.to_integral_value()
