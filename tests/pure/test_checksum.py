"""The configuration checksum must match the Go operator's byte for byte."""

import hashlib

import pytest

from trussium_operator.common.render import config_checksum


def sha256(encoded: str) -> str:
    return hashlib.sha256(encoded.encode()).hexdigest()


@pytest.mark.parametrize(
    ("data", "encoded"),
    [
        ({"A": "x"}, "1:A:1:x;"),
        ({}, ""),
        ({"K": ""}, "1:K:0:;"),
        # Keys sort by bytes: upper case before lower case.
        ({"a": "1", "B": "2"}, "1:B:1:2;1:a:1:1;"),
        # Lengths count UTF-8 bytes, not characters.
        ({"é": "€"}, "2:é:3:€;"),
        (
            {
                "TRUSSIUM_PROVIDER__NAME": "openai",
                "TRUSSIUM_ENVIRONMENT": "production",
                "TRUSSIUM_RUNTIME__PORT": "9000",
                "TRUSSIUM_RUNTIME__HOST": "0.0.0.0",
            },
            "20:TRUSSIUM_ENVIRONMENT:10:production;"
            "23:TRUSSIUM_PROVIDER__NAME:6:openai;"
            "22:TRUSSIUM_RUNTIME__HOST:7:0.0.0.0;"
            "22:TRUSSIUM_RUNTIME__PORT:4:9000;",
        ),
    ],
)
def test_checksum_is_sha256_of_the_length_prefixed_encoding(
    data: dict[str, str], encoded: str
) -> None:
    assert config_checksum(data) == sha256(encoded)


def test_checksum_is_lowercase_hex() -> None:
    checksum = config_checksum({"A": "x"})
    assert len(checksum) == 64
    assert checksum == checksum.lower()


def test_insertion_order_never_matters() -> None:
    forward = {"a": "1", "b": "2", "c": "3"}
    backward = dict(reversed(forward.items()))
    assert list(forward) != list(backward)
    assert config_checksum(forward) == config_checksum(backward)


def test_length_prefixes_keep_key_value_boundaries_apart() -> None:
    assert config_checksum({"ab": "c"}) != config_checksum({"a": "bc"})
    assert config_checksum({"a": "1;1:b:1:2"}) != config_checksum({"a": "1", "b": "2"})
