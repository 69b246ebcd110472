"""The managed-fields takeover (common/managed_fields.py), table-driven."""

from typing import Any

import pytest

from trussium_operator.common.managed_fields import has_legacy_entries, merge_fields, take_over

OURS = "trussium-operator"
Fields = dict[str, Any]
LEGACY = frozenset({"manager"})


def entry(manager: str, operation: str, fields: dict[str, Any], **extra: str) -> dict[str, Any]:
    return {
        "manager": manager,
        "operation": operation,
        "apiVersion": "v1",
        "time": "2026-01-01T00:00:00Z",
        "fieldsType": "FieldsV1",
        "fieldsV1": fields,
        **extra,
    }


DATA_A: Fields = {"f:data": {".": {}, "f:A": {}}}
DATA_B: Fields = {"f:data": {".": {}, "f:B": {}}}
DATA_AB: Fields = {"f:data": {".": {}, "f:A": {}, "f:B": {}}}
REPLICAS: Fields = {"f:spec": {"f:replicas": {}}}
RESTARTED: Fields = {
    "f:spec": {"f:template": {"f:metadata": {"f:annotations": {"f:x/restartedAt": {}}}}}
}

CASES: list[tuple[str, list[dict[str, Any]], list[dict[str, Any]] | None]] = [
    ("no entries", [], None),
    ("only ours", [entry(OURS, "Apply", DATA_A)], None),
    (
        "legacy alone becomes our Apply entry",
        [entry("manager", "Update", DATA_A)],
        [entry(OURS, "Apply", DATA_A)],
    ),
    (
        "legacy merged into our existing Apply entry",
        [entry(OURS, "Apply", DATA_A), entry("manager", "Update", DATA_B)],
        [entry(OURS, "Apply", DATA_AB)],
    ),
    (
        "other managers and subresources untouched",
        [
            entry("manager", "Update", DATA_A),
            entry("kube-controller-manager", "Update", REPLICAS, subresource="scale"),
            entry("kubectl-rollout", "Update", RESTARTED),
            entry("manager", "Update", {"f:status": {}}, subresource="status"),
        ],
        [
            entry(OURS, "Apply", DATA_A),
            entry("kube-controller-manager", "Update", REPLICAS, subresource="scale"),
            entry("kubectl-rollout", "Update", RESTARTED),
            entry("manager", "Update", {"f:status": {}}, subresource="status"),
        ],
    ),
    (
        "a legacy name applying (not updating) is not legacy",
        [entry("manager", "Apply", DATA_A)],
        None,
    ),
    (
        "several legacy entries fold into one",
        [
            entry("manager", "Update", DATA_A),
            entry(OURS, "Apply", {}),
            entry("manager", "Update", DATA_B),
        ],
        [entry(OURS, "Apply", DATA_AB)],
    ),
    (
        "our own Update entry is not moved",
        [entry(OURS, "Update", DATA_A)],
        None,
    ),
]


@pytest.mark.parametrize(("entries", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_take_over(entries: list[dict[str, Any]], expected: list[dict[str, Any]] | None) -> None:
    before = [dict(e) for e in entries]
    assert take_over(entries, LEGACY, OURS) == expected
    assert entries == before, "the input must not be mutated"
    assert has_legacy_entries(entries, LEGACY) == (expected is not None)


def test_configured_legacy_managers_are_moved_too() -> None:
    entries = [entry("helm", "Update", DATA_A), entry("manager", "Update", DATA_B)]
    assert take_over(entries, {"manager", "helm"}, OURS) == [entry(OURS, "Apply", DATA_AB)]
    assert take_over(entries, {"helm"}, OURS) == [
        entry(OURS, "Apply", DATA_A),
        entry("manager", "Update", DATA_B),
    ]


def test_our_own_name_is_never_treated_as_legacy() -> None:
    entries = [entry(OURS, "Update", DATA_A)]
    assert take_over(entries, {OURS}, OURS) is None


def test_merge_fields_is_a_deep_union() -> None:
    assert merge_fields(
        {"f:spec": {"f:a": {}, 'k:{"name":"x"}': {".": {}, "f:v": {}}}},
        {"f:spec": {"f:b": {}, 'k:{"name":"x"}': {"f:w": {}}}},
    ) == {"f:spec": {"f:a": {}, "f:b": {}, 'k:{"name":"x"}': {".": {}, "f:v": {}, "f:w": {}}}}
