"""`validate` over a kustomize source tree: kustomizations and patches are recognised.

The tree has a base with a TrussiumRuntime and an overlay with a strategic-
merge patch of it and a JSON 6902 patch. The kustomizations and the JSON
6902 patch are skipped with a reason; the strategic-merge patch is judged on
what it can break alone (types, enumerations, unknown fields, ...), not on
the fields it leaves to the base.
"""

import json
from pathlib import Path

import pytest

from trussium_operator.webhook.cli import main

REPO = Path(__file__).resolve().parents[2]
RUNTIME = (REPO / "tests" / "samples" / "valid" / "minimal.yaml").read_text()
HEAD = (
    "apiVersion: runtime.trussium.io/v1alpha1\nkind: TrussiumRuntime\nmetadata: {name: minimal}\n"
)
GOOD_PATCH = HEAD + "spec:\n  replicas: 3\n  podMetadata: {labels: {team: a, $patch: merge}}\n"
BAD_PATCH = HEAD + ("spec:\n  replicas: three\n  service: {type: Balancer}\n  containers: []\n")
OPERATIONS = '- op: replace\n  path: /spec/image/tag\n  value: "1.5.0"\n'


def tree(root: Path, patch: str, *, old_fields: bool = False) -> Path:
    """base/ and overlays/prod/; `old_fields`: the patches under the deprecated fields."""
    files = {
        "base/kustomization.yaml": "resources: [runtime.yaml]\n",
        "base/runtime.yaml": RUNTIME,
        "overlays/prod/patches/runtime.yaml": patch,
        "overlays/prod/tag.yaml": OPERATIONS,
        "overlays/prod/kustomization.yaml": (
            "resources: [../../base]\n"
            "patchesStrategicMerge: [patches/runtime.yaml]\n"
            "patchesJson6902:\n"
            "  - {path: tag.yaml, target: {kind: TrussiumRuntime, name: minimal}}\n"
            if old_fields
            else "resources: [../../base]\n"
            "patches:\n"
            "  - path: patches/runtime.yaml\n"
            "  - {path: tag.yaml, target: {kind: TrussiumRuntime, name: minimal}}\n"
        ),
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def validate(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, object]]:
    code = main(["validate", "-o", "json", *args])
    report: dict[str, object] = json.loads(capsys.readouterr().out)
    return code, report


@pytest.mark.parametrize("old_fields", [False, True], ids=["patches", "deprecated-fields"])
@pytest.mark.parametrize("strict", [[], ["--strict"], ["--fail-on-skipped"]])
def test_a_good_tree_passes_with_its_kustomize_files_skipped(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, old_fields: bool, strict: list[str]
) -> None:
    root = tree(tmp_path, GOOD_PATCH, old_fields=old_fields)
    code, report = validate(capsys, *strict, str(root))
    assert (code, report["errors"], report["warnings"]) == (0, [], []), report
    skipped = {item["file"]: item["reason"] for item in report["skipped"]}  # type: ignore[attr-defined]
    assert set(skipped) == {
        str(root / "base" / "kustomization.yaml"),
        str(root / "overlays" / "prod" / "kustomization.yaml"),
        str(root / "overlays" / "prod" / "tag.yaml"),
    }
    assert skipped[str(root / "base" / "kustomization.yaml")].startswith(
        "skipped: a kustomization, not an object for kubectl"
    )
    assert skipped[str(root / "overlays" / "prod" / "tag.yaml")].startswith(
        "skipped: a JSON 6902 patch"
    )
    assert report["runtimes"] == 1  # the patch is no second runtime, nor a duplicate
    assert str(report["summary"]).endswith("3 kustomize file(s) skipped")


def test_a_bad_patch_fails_on_what_it_breaks_alone(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    root = tree(tmp_path, BAD_PATCH)
    code, report = validate(capsys, str(root))
    assert code == 1
    found = {(e["field"], e["rule"]) for e in report["errors"]}  # type: ignore[attr-defined]
    assert found == {
        ("spec.replicas", "FieldType"),
        ("spec.service.type", "SupportedValues"),
        ("spec.containers", "UnknownField"),
    }
    assert {e["line"] for e in report["errors"]} == {5, 6, 7}  # type: ignore[attr-defined]


def test_a_patch_named_alone_is_still_known_by_its_kustomization(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """What pre-commit does: it passes the changed files, not the tree."""
    root = tree(tmp_path, GOOD_PATCH)
    patch = root / "overlays" / "prod" / "patches" / "runtime.yaml"
    code, report = validate(capsys, str(patch), str(root / "overlays" / "prod" / "tag.yaml"))
    assert (code, report["errors"]) == (0, [])
    assert len(report["skipped"]) == 1  # type: ignore[arg-type]


def test_without_a_kustomization_the_same_file_is_a_whole_runtime(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "runtime.yaml").write_text(HEAD + "spec:\n  replicas: 3\n")
    code, report = validate(capsys, str(tmp_path))
    assert code == 1
    assert {e["field"] for e in report["errors"]} == {"spec.image", "spec.provider"}  # type: ignore[attr-defined]
