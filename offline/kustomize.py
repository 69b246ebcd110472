"""Kustomize source trees: which files are patches, and what a patch alone can be judged on.

A kustomization (`kustomization.yaml`) says how kustomize builds objects:
from `resources`, changed by patches. Its own file is not an object for
kubectl, and a patch is a part of an object: a strategic-merge patch
(listed under `patches` or `patchesStrategicMerge`) holds the fields it
changes, and a JSON 6902 patch (`patchesJson6902`, or a list of operations
under `patches`) holds operations. Judged as whole objects, a patch breaks
every rule that needs the fields it leaves to the base. So a strategic-
merge patch is judged only on the rules that read one field's value
(`CHECKABLE_IN_A_PATCH`), and the other files are skipped with a reason.
"""

from collections.abc import Iterator
from typing import Any

from trussium_operator.common.ratcheting import TolerableRule
from trussium_operator.common.rules import Rule
from trussium_operator.offline.checks import DocumentCheck

KUSTOMIZATION_FILES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
KUSTOMIZATION = (
    "a kustomization, not an object for kubectl; its patches are checked on their own, "
    "the result with: kubectl kustomize DIR | trussium-webhook validate -f -"
)
JSON6902_PATCH = (
    "a JSON 6902 patch of a kustomization; check the result with: "
    "kubectl kustomize DIR | trussium-webhook validate -f -"
)
# The rules that judge a field's value alone: whatever the base holds, a patch that sets
# the field breaks them in the result too. The rest need fields a patch may leave out.
CHECKABLE_IN_A_PATCH = frozenset(
    {
        Rule.UNKNOWN_FIELD,
        Rule.FIELD_TYPE,
        Rule.SUPPORTED_VALUES,
        Rule.VALUE_BOUNDS,
        Rule.QUANTITY,
        Rule.JSON_LIMITS,
        Rule.COLLECTION_TOO_LARGE,
        TolerableRule.TOO_MANY_ENTRIES,
        Rule.KEYS_AND_VALUES,
        TolerableRule.RESERVED_POD_LABEL,
        TolerableRule.RESERVED_POD_ANNOTATION,
        TolerableRule.SECURITY_PROFILE_ANNOTATION,
        Rule.SECURITY_PROFILE_REFUSED,
        Rule.URL_CREDENTIALS,
        TolerableRule.BASE_URL_CREDENTIALS,
        Rule.DUPLICATE_KEY,
        Rule.NEAR_MISS,
        Rule.UNSERVED_VERSION,
    }
)


def patch_files(kustomization: dict[str, Any]) -> tuple[list[str], list[str]]:
    """The paths (relative to the kustomization's folder) of its patches, as
    (strategic-merge or either, JSON 6902); inline patches have none."""
    either: list[str] = []
    json6902: list[str] = []
    for entry in _list(kustomization.get("patches")):
        if isinstance(entry, dict) and isinstance(entry.get("path"), str):
            either.append(entry["path"])
    for entry in _list(kustomization.get("patchesStrategicMerge")):
        # An entry is a path, or an inline patch (YAML text, which has a line break or ':').
        if isinstance(entry, str) and "\n" not in entry and ": " not in entry:
            either.append(entry)
    for entry in _list(kustomization.get("patchesJson6902")):
        if isinstance(entry, dict) and isinstance(entry.get("path"), str):
            json6902.append(entry["path"])
    return either, json6902


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def without_directives(value: Any) -> Any:
    """A strategic-merge patch without its directives (`$patch`, `$retainKeys`,
    `$setElementOrder/...`, `$deleteFromPrimitiveList/...`), which are no fields."""
    if isinstance(value, dict):
        return {k: without_directives(v) for k, v in value.items() if not str(k).startswith("$")}
    if isinstance(value, list):
        return [without_directives(item) for item in value]
    return value


def as_patch(check: DocumentCheck) -> DocumentCheck:
    """The verdict on a strategic-merge patch: the findings of the rules a patch alone can
    break, and no runtime (the base defines it; the patch is not counted as another)."""
    return DocumentCheck(findings=[f for f in check.findings if f.rule in CHECKABLE_IN_A_PATCH])


def operations_list(text: str) -> bool:
    """Whether YAML `text` is a list at the top (JSON 6902 operations), not an object."""
    return next(_content_lines(text), "").startswith(("-", "["))


def _content_lines(text: str) -> Iterator[str]:
    for line in text.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("#") and stripped != "---":
            yield stripped
