"""The soundness check of decoded documents: its quick pass and its path-finding walk agree."""

from typing import Any

import pytest

from trussium_operator.common.json_limits import MAX_DEPTH, JsonProblem, json_problem


def nested(depth: int) -> Any:
    value: Any = {}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


@pytest.mark.parametrize(
    "document",
    [
        {"spec": {"note": "café ☕", "labels": {"ключ": "значение"}}, "list": ["日本", 1, None]},
        {1: "a YAML map may have integer keys", "b": [True, 2.5]},
        nested(MAX_DEPTH),
        "plain text",
    ],
    ids=["non-ascii", "integer-keys", "deepest-allowed", "string"],
)
def test_a_sound_document_has_no_problem(document: Any) -> None:
    assert json_problem(document) is None


WIDE = {f"k{i}": {"v": [f"x{j}" for j in range(20)]} for i in range(200)}


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        (
            {"spec": WIDE | {"k7": {"v": ["ok", "\ud800"]}}},
            JsonProblem(
                "spec.k7.v[1]", "not valid Unicode (a lone surrogate escape such as \\ud800)"
            ),
        ),
        (
            {"spec": WIDE | {"bad\udfff": 1}},
            JsonProblem(
                "spec[bad\\udfff]",
                "the key is not valid Unicode (a lone surrogate escape such as \\ud800)",
            ),
        ),
        (
            nested(MAX_DEPTH + 1),
            JsonProblem(".".join(["a"] * MAX_DEPTH), f"nested deeper than {MAX_DEPTH} levels"),
        ),
    ],
    ids=["value", "key", "too-deep"],
)
def test_a_faulty_document_is_reported_at_its_place(document: Any, expected: JsonProblem) -> None:
    assert json_problem(document) == expected
