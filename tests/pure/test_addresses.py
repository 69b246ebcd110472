"""The HOST:PORT form both programs' bind-address flags take."""

import pytest

from trussium_operator.serving.addresses import split_address


@pytest.mark.parametrize(
    ("address", "expected"),
    [
        ("127.0.0.1:8080", ("127.0.0.1", 8080)),
        ("[::1]:9443", ("::1", 9443)),
        (":8081", ("0.0.0.0", 8081)),
        ("0.0.0.0:0", ("0.0.0.0", 0)),
    ],
)
def test_host_and_port(address: str, expected: tuple[str, int]) -> None:
    assert split_address(address) == expected


@pytest.mark.parametrize("address", ["9443", "localhost:", "localhost:http", "[::1]:65536"])
def test_malformed_addresses_are_refused_with_the_form_expected(address: str) -> None:
    with pytest.raises(ValueError, match="expected HOST:PORT"):
        split_address(address)
