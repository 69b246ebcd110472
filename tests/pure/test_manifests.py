"""Manifest text as kubectl reads it: multi-document YAML or JSON, with clear errors."""

import pytest

from common.manifests import ManifestError, parse_manifests


def test_multi_document_yaml_skips_empty_documents() -> None:
    text = "---\nkind: A\n---\n\n---\n# only a comment\n---\nkind: B\n"
    assert parse_manifests(text) == [{"kind": "A"}, {"kind": "B"}]


def test_json_is_accepted() -> None:
    assert parse_manifests('{"kind": "A", "spec": {"replicas": 2}}') == [
        {"kind": "A", "spec": {"replicas": 2}}
    ]


def test_lists_are_expanded() -> None:
    text = "kind: List\nitems:\n- kind: A\n- kind: B\n"
    assert parse_manifests(text) == [{"kind": "A"}, {"kind": "B"}]
    assert parse_manifests("kind: TrussiumRuntimeList\nitems: []\n") == []


def test_dates_stay_strings_as_the_api_server_sees_them() -> None:
    (obj,) = parse_manifests("metadata:\n  annotations:\n    since: 2024-01-01\n")
    assert obj["metadata"]["annotations"]["since"] == "2024-01-01"


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("a: 1\na: 2\n", "f.yaml: invalid YAML or JSON at line 2, column 1: duplicate key 'a'"),
        ("kind: A\nspec: [\n", "f.yaml: invalid YAML or JSON at line 3"),
        ("kind: A\n---\n- 1\n", "f.yaml: document 2: expected a Kubernetes object"),
        ("kind: List\nitems: 3\n", "the items of a List must be a list"),
        ('{"a": \n', "f.yaml: invalid YAML or JSON"),
    ],
)
def test_errors_name_the_source_and_place(text: str, fragment: str) -> None:
    with pytest.raises(ManifestError) as error:
        parse_manifests(text, "f.yaml")
    assert fragment in str(error.value)
