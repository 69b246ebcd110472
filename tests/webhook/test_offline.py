"""`trussium-webhook validate`: exit codes, messages and outputs a CI job relies on."""

import io
import json
from pathlib import Path

import pytest
import yaml

from webhook.cli import main

from .reviews import SAMPLES

MINIMAL = (SAMPLES / "valid" / "minimal.yaml").read_text()


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["validate", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_valid_files_exit_0(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "-f", str(SAMPLES / "valid" / "minimal.yaml"))
    assert code == 0
    assert "1 TrussiumRuntime(s) valid" in out


def test_violations_exit_1_with_file_object_and_field(
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = SAMPLES / "invalid" / "autoscaling.yaml"
    code, out, _ = run(capsys, "-f", str(SAMPLES / "valid" / "minimal.yaml"), "-f", str(path))
    assert code == 1
    assert f"{path}: default/autoscaling: spec.autoscaling: maxReplicas must be" in out
    assert f"{path}: default/autoscaling: spec.autoscaling.enabled: autoscaling needs" in out


def test_folders_are_read_recursively_and_other_kinds_skipped(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    nested = tmp_path / "a" / "b"
    nested.mkdir(parents=True)
    (nested / "runtime.yml").write_text(MINIMAL)
    (tmp_path / "runtime.json").write_text(json.dumps(yaml.safe_load(MINIMAL)))
    (tmp_path / "service.yaml").write_text("apiVersion: v1\nkind: Service\nmetadata: {name: s}\n")
    (tmp_path / "README.md").write_text("not a manifest: {")
    code, out, _ = run(capsys, "-f", str(tmp_path))
    assert code == 0
    assert "2 TrussiumRuntime(s) valid" in out


def test_stdin(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    broken = MINIMAL.replace('tag: "1.4.2"', "tag: -bad")
    monkeypatch.setattr("sys.stdin", io.StringIO(broken))
    code, out, _ = run(capsys, "-f", "-")
    assert code == 1
    assert "<stdin>: default/minimal: spec.image.tag: invalid value '-bad'" in out


def test_warnings_fail_only_with_strict(capsys: pytest.CaptureFixture[str]) -> None:
    path = str(SAMPLES / "valid" / "latest-tag.yaml")
    code, out, _ = run(capsys, "-f", path)
    assert code == 0
    assert "default/latest-tag: warning: spec.image.tag: the mutable tag 'latest'" in out
    assert run(capsys, "-f", path, "--strict")[0] == 1


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("a: [unclosed", "invalid YAML or JSON at line"),
        ("a: 1\na: 2\n", "duplicate key"),
    ],
)
def test_parse_errors_exit_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, content: str, message: str
) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text(content)
    code, _, err = run(capsys, "-f", str(path), "-f", str(SAMPLES / "invalid"))
    assert code == 2
    assert str(path) in err
    assert message in err


def test_missing_path_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(capsys, "-f", str(tmp_path / "nope.yaml"))
    assert code == 2
    assert "no such file or folder" in err


def test_usage_error_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["validate"])
    assert exited.value.code == 2


def test_unserved_version_is_a_violation(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "old.yaml"
    path.write_text(MINIMAL.replace("v1alpha1", "v1beta1"))
    code, out, _ = run(capsys, "-f", str(path))
    assert code == 1
    assert "apiVersion: not served; use runtime.trussium.io/v1alpha1" in out


def test_json_output(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "-o", "json", "-f", str(SAMPLES))
    report = json.loads(out)
    assert code == 1
    assert report["valid"] is False
    assert report["runtimes"] == len(list(SAMPLES.rglob("*.yaml")))
    assert {
        "file": str(SAMPLES / "invalid" / "tag-and-digest.yaml"),
        "namespace": "default",
        "name": "tag-and-digest",
        "severity": "error",
        "field": "spec.image",
        "message": "exactly one of tag or digest must be specified",
    } in report["errors"]
    assert [w["name"] for w in report["warnings"]] == ["latest-tag"]


def test_print_defaulted_writes_yaml_to_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(
        capsys, "--print-defaulted", "-f", str(SAMPLES / "valid" / "latest-tag.yaml")
    )
    assert code == 0
    (defaulted,) = yaml.safe_load_all(out)
    assert defaulted["spec"]["replicas"] == 1
    assert defaulted["spec"]["service"] == {"type": "ClusterIP", "port": 9000}
    assert "warning" in err
