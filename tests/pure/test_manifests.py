"""Manifest text as kubectl reads it: multi-document YAML or JSON, with clear errors."""

import pytest

from trussium_operator.offline.manifests import (
    ManifestError,
    NotAManifestError,
    parse_manifests,
    read_manifests_text,
)


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
        ("1: a\n'1': b\n", "f.yaml: invalid YAML or JSON at line 2, column 1: keys '1' of"),
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


@pytest.mark.parametrize(
    ("scalar", "value"),
    [
        ("1e3", 1000),  # a float to go-yaml, an integer once the API server reads the JSON
        ("1.0", 1),
        ("1.5", 1.5),
        ("yes", True),
        ("off", False),
        ("y", True),
        ("~", None),
        ("0o17", 15),
        ("017", 15),
        ("0x1F", 31),
        ("1_000", 1000),
        ("08", 8),  # not octal: go-yaml falls back to a float
        ("1:30", "1:30"),  # no sexagesimal numbers
        ("2001-12-14", "2001-12-14"),  # timestamps stay strings
        ("18446744073709551615", 1.8446744073709552e19),  # past int64: a float
        ("1e400", "1e400"),  # out of range: a string
        ("'1e3'", "1e3"),
        ("!!str 12", "12"),
        ("!!float 1", 1),
    ],
)
def test_scalars_resolve_as_the_api_server_resolves_them(scalar: str, value: object) -> None:
    (obj,) = parse_manifests(f"v: {scalar}\n")
    assert obj["v"] == value
    assert type(obj["v"]) is type(value)


def test_non_string_keys_become_the_api_servers_strings() -> None:
    (obj,) = parse_manifests("1: a\non: b\n1.5: c\n1e7: d\n0x10: e\n")
    assert list(obj) == ["1", "true", "1.5", "1e+07", "16"]


def test_merge_keys_and_aliases_are_expanded() -> None:
    (obj,) = parse_manifests("base: &b {x: 1}\nmerged:\n  <<: *b\n  z: 2\n")
    assert obj["merged"] == {"x": 1, "z": 2}
    obj["base"]["x"] = 3
    assert obj["merged"]["x"] == 1, "an alias is a copy, as go-yaml decodes it anew"


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("v: .inf\n", "unsupported value"),
        ("~: a\n", "unsupported map key"),
        ("? [1]\n: a\n", "invalid map key"),
        ("v: !!int 1.5\n", "cannot decode !!float `1.5` as a !!int"),
        ("v: *nowhere\n", "unknown anchor"),
        ("v: " + "[" * 500 + "]" * 500 + "\n", "nested deeper than 200 levels"),
        (
            "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n"
            + "".join(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 6)),
            "excessive aliasing",
        ),
    ],
)
def test_what_the_api_server_refuses_is_an_error(text: str, fragment: str) -> None:
    with pytest.raises(ManifestError) as error:
        parse_manifests(text, "f.yaml")
    assert fragment in str(error.value)


@pytest.mark.parametrize(
    "text",
    [
        "metadata:\n  name: {{ .Release.Name }}\n",
        "{{- if .Values.enabled }}\nkind: A\n{{- end }}\n",
        "a: !Ref b\n",
        "a: !!python/object:os.system [x]\n",
    ],
)
def test_templates_and_custom_tags_are_not_manifests(text: str) -> None:
    with pytest.raises(NotAManifestError):
        read_manifests_text(text, "f.yaml")


def test_positions_follow_the_fields_and_list_items() -> None:
    text = "kind: List\nitems:\n- kind: A\n  spec:\n    tolerations:\n    - key: k\n"
    (manifest,) = read_manifests_text(text)
    assert manifest.position("spec.tolerations[0].key") == (6, 7)
    assert manifest.position("spec.tolerations[0].missing") == (6, 7)
    assert manifest.position("spec") == (4, 3)
    (labels,) = read_manifests_text("metadata:\n  labels:\n    a.b/c: x\n")
    assert labels.position("metadata.labels[a.b/c]") == (3, 5)


def test_keys_set_twice_keep_the_later_value_and_are_listed() -> None:
    """As kubectl reads them (go-yaml v2): a merge overrides what comes before it."""
    text = "a: 1\na: 2\nbase: &b {p: 1, q: 1}\nm:\n  p: 2\n  <<: *b\n  q: 3\n"
    (manifest,) = read_manifests_text(text)
    assert manifest.object["a"] == 2
    assert manifest.object["m"] == {"p": 1, "q": 3}
    assert manifest.duplicates == [(("a",), (2, 1)), (("m", "p"), (6, 7)), (("m", "q"), (7, 3))]
    (first_wins,) = parse_manifests("a: &a {x: 1}\nb: &b {x: 2}\nm:\n  <<: [*a, *b]\n")
    assert first_wins["m"] == {"x": 1}
