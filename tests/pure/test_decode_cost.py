"""The estimate of what decoding a body costs: an upper bound, found before decoding."""

import json
import tracemalloc
from typing import Any

import pytest
from hypothesis import given, settings

from tests.support.strategies import json_values
from trussium_operator.common.decode_cost import decoded_bytes, text_width, values_at_most
from trussium_operator.common.json_limits import json_problem

SIZE = 200_000
# What the json module allocates for itself, whatever the body.
JSON_STATE_BYTES = 4096


def _values(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + sum(_values(v) for v in value.values())
    if isinstance(value, list):
        return 1 + sum(_values(v) for v in value)
    return 1


@settings(max_examples=300, deadline=None)
@given(json_values(max_leaves=40))
def test_values_are_never_undercounted(document: Any) -> None:
    for body in (json.dumps(document), json.dumps(document, indent=1, ensure_ascii=False)):
        assert values_at_most(body.encode()) >= _values(document)


def _filled(unit: bytes) -> bytes:
    return b'{"a":[' + b",".join([unit] * (SIZE // (len(unit) + 1))) + b"]}"


def _distinct_keys() -> bytes:
    return b"{" + b",".join(b'"k%d":0' % i for i in range(SIZE // 9)) + b"}"


@pytest.mark.parametrize(
    "body",
    [
        _filled(b"{}"),
        _filled(b"[]"),
        _filled(b'{"a":0}'),
        _filled(b'{"a":{}}'),
        _filled(b"[{}]"),
        _filled(b'{"type":"a"}'),
        _filled(b'"ab"'),
        _filled(b"1000"),
        _filled(b"0.5"),
        _distinct_keys(),
        b'["' + b"a" * SIZE + b'"]',
        b'["\\ud83d\\ude00' + b"a" * SIZE + b'"]',
        '["é€'.encode() + b"a" * SIZE + b'"]',
        b'["\\u20ac' + b"a" * (SIZE // 2) + b'","\\u20ac' + b"a" * (SIZE // 2) + b'"]',
    ],
    ids=lambda body: body[:16].decode(errors="replace"),
)
def test_the_estimate_is_above_what_decoding_and_checking_hold(body: bytes) -> None:
    tracemalloc.start()
    try:
        document = json.loads(body)
        assert json_problem(document) is None
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(body) + peak <= decoded_bytes(body) + JSON_STATE_BYTES


@pytest.mark.parametrize(
    ("body", "width"),
    [
        (b'{"a":"plain \\u003c\\u0026"}', 1),
        ('{"a":"latin é"}'.encode(), 1),
        ('{"a":"euro €"}'.encode(), 2),
        (b'{"a":"\\u20ac"}', 2),
        ('{"a":"emoji 😀"}'.encode(), 4),
        (b'{"a":"\\ud83d\\ude00"}', 4),
    ],
)
def test_text_width_is_that_of_the_widest_character(body: bytes, width: int) -> None:
    assert text_width(body) == width
    text = json.loads(body)["a"]
    assert max(map(ord, text)) < 256**width
