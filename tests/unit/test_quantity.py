"""Kubernetes quantities: the grammar the API server accepts and exact comparison."""

import re
from decimal import Decimal

import pytest

from common.quantity import QUANTITY_PATTERN, QuantityError, is_integer, parse_quantity


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


def test_huge_exponents_do_not_hang() -> None:
    assert parse_quantity("1e999") > parse_quantity("1E")
    with pytest.raises(QuantityError, match="out of range"):
        parse_quantity("1e99999999")


def test_the_crd_pattern_accepts_every_parseable_string() -> None:
    for text in ["1", "500m", ".5", "1.", "+2", "2e3", "1e1.5", "64Ki", "1E"]:
        assert re.fullmatch(QUANTITY_PATTERN.strip("^$"), text), text
    for text in ["abc", "1Gb", "1 Gi", ""]:
        assert not re.fullmatch(QUANTITY_PATTERN.strip("^$"), text), text


def test_is_integer() -> None:
    assert is_integer(parse_quantity("2k"))
    assert not is_integer(parse_quantity("1500m"))
