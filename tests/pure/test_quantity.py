"""Kubernetes quantities: the grammar the API server accepts and exact comparison."""

import re
from decimal import Decimal

import pytest

from trussium_operator.common.quantity import (
    QUANTITY_PATTERN,
    QuantityError,
    is_integer,
    parse_quantity,
)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1", "1"),
        (3, "3"),
        ("500m", "0.5"),
        ("0.5", "0.5"),
        (".5", "0.5"),
        ("1.", "1"),
        ("+2", "2"),
        ("-2", "-2"),
        ("1k", "1000"),
        ("1Ki", "1024"),
        ("2Gi", str(2 * 2**30)),
        ("1G", "1000000000"),
        ("1E", "1000000000000000000"),
        ("1Ei", str(2**60)),
        ("100n", "0.0000001"),
        ("3u", "0.000003"),
        ("2e3", "2000"),
        ("2E-3", "0.002"),
        ("1e+2", "100"),
    ],
)
def test_values(text: object, value: str) -> None:
    assert parse_quantity(text) == Decimal(value)


@pytest.mark.parametrize(
    "text", ["", "abc", "1Gb", "1gi", "1 Gi", "--1", "1e", "1e1.5", "Ki", ".", True, 1.5, None]
)
def test_invalid(text: object) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(text)


def test_comparison_across_suffixes() -> None:
    assert parse_quantity("1Gi") > parse_quantity("1G")
    assert parse_quantity("500m") == parse_quantity("0.5")
    assert parse_quantity("1024Mi") == parse_quantity("1Gi")


@pytest.mark.parametrize(
    "text",
    ["1e999", "1e99999999", "1e1000000", "1e" + "9" * 5000, "8Ei", 2**63, "9223372036854775808"],
)
def test_beyond_kubernetes_int64_range_is_refused_quickly(text: object) -> None:
    with pytest.raises(QuantityError, match=r"out of range.*2\^63-1"):
        parse_quantity(text)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("9223372036854775807", str(2**63 - 1)),
        ("7Ei", str(7 * 2**60)),
        ("1e-1000000", "1e-9"),
        ("0.1n", "1e-9"),
        ("1.5n", "2e-9"),
        ("-1e-20", "-1e-9"),
        ("0e99999", "0"),
    ],
)
def test_values_are_stored_like_kubernetes_rounding_up_to_a_nano(text: str, value: str) -> None:
    assert parse_quantity(text) == Decimal(value)


def test_the_crd_pattern_accepts_every_parseable_string() -> None:
    for text in ["1", "500m", ".5", "1.", "+2", "2e3", "1e1.5", "64Ki", "1E"]:
        assert re.fullmatch(QUANTITY_PATTERN.strip("^$"), text), text
    for text in ["abc", "1Gb", "1 Gi", ""]:
        assert not re.fullmatch(QUANTITY_PATTERN.strip("^$"), text), text


def test_is_integer() -> None:
    assert is_integer(parse_quantity("2k"))
    assert not is_integer(parse_quantity("1500m"))
