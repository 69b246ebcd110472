"""action.yml, the composite GitHub Action: its steps' scripts run as a runner runs them.

Each step's `run` goes to `bash --noprofile --norc -eo pipefail`, with its
`env` filled in from the inputs and the `github` context, and with
RUNNER_TEMP, GITHUB_PATH and GITHUB_OUTPUT files as a runner provides them.
The action's sources are a snapshot of the working tree; its install step
builds the package from them and takes the dependencies from the test's
environment (`installed_dependencies`, docs/adr/0041).
"""

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.repository_snapshot import REPO, installed_dependencies, snapshot

ACTION = yaml.safe_load((REPO / "action.yml").read_text())
SAMPLES = REPO / "tests" / "samples"
EXPRESSION = re.compile(r"\$\{\{\s*([\w.]+)\s*\}\}")
# Installed once for the module: the later steps run as often as the tests ask.
INSTALL, VALIDATE = ACTION["runs"]["steps"][:1], ACTION["runs"]["steps"][1:]


def test_inputs_are_documented() -> None:
    assert set(ACTION["inputs"]) == {"paths", "strict", "sarif", "version"}
    assert all(spec["description"] for spec in ACTION["inputs"].values())
    assert ACTION["runs"]["using"] == "composite"
    page = (REPO / "docs" / "offline-validation.md").read_text()
    assert "github/codeql-action/upload-sarif" in page
    for name in ACTION["inputs"]:
        assert f"`{name}`" in page, name


class Runner:
    """Runs the action's steps in `workspace`, keeping what GITHUB_PATH adds to PATH."""

    def __init__(self, root: Path, action_path: Path, github: dict[str, str]) -> None:
        self.root, self.workspace = root, root / "workspace"
        self.workspace.mkdir()
        (root / "temp").mkdir()
        self.context = {"github.action_path": str(action_path), **github}
        self.path = ["/usr/bin", "/bin"]

    def run(
        self, inputs: dict[str, str], steps: list[dict[str, Any]]
    ) -> tuple[int, str, dict[str, str]]:
        """`steps` in order, as long as they succeed; the last exit code, the output and
        the step outputs."""
        defaults = {name: spec.get("default", "") for name, spec in ACTION["inputs"].items()}
        values = {**{f"inputs.{k}": v for k, v in (defaults | inputs).items()}, **self.context}
        outputs: dict[str, str] = {}
        printed = ""
        for step in steps:
            github_path, github_output = self.root / "path", self.root / "output"
            github_path.write_text("")
            github_output.write_text("")
            env = {
                **installed_dependencies(),
                "PATH": os.pathsep.join(self.path),
                "HOME": str(self.root),
                "RUNNER_TEMP": str(self.root / "temp"),
                "GITHUB_PATH": str(github_path),
                "GITHUB_OUTPUT": str(github_output),
                **{k: EXPRESSION.sub(lambda m: values[m[1]], v) for k, v in step["env"].items()},
            }
            assert step["shell"] == "bash"
            result = subprocess.run(
                ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]],
                cwd=self.workspace,
                env=env,
                capture_output=True,
                text=True,
                check=False,
                timeout=300,
            )
            printed += result.stdout + result.stderr
            self.path = github_path.read_text().split() + self.path
            outputs |= dict(line.split("=", 1) for line in github_output.read_text().splitlines())
            if result.returncode != 0:
                return result.returncode, printed, outputs
        return 0, printed, outputs


@pytest.fixture(scope="module")
def runner(tmp_path_factory: pytest.TempPathFactory) -> Runner:
    root = tmp_path_factory.mktemp("action")
    snapshot(root / "action")
    github = {
        "github.server_url": "https://github.example",
        "github.action_repository": "acme/trussium-operator",
        "github.action_ref": "v0.1.0",
    }
    runner = Runner(root, root / "action", github)
    code, printed, _ = runner.run({}, INSTALL)
    assert code == 0, printed
    assert runner.path[0] == str(root / "temp" / "trussium-operator" / "bin")
    deploy = runner.workspace / "deploy"
    deploy.mkdir()
    (deploy / "good.yaml").write_text((SAMPLES / "valid" / "minimal.yaml").read_text())
    (deploy / "latest.yaml").write_text((SAMPLES / "valid" / "latest-tag.yaml").read_text())
    return runner


def sarif_results(path: Path) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = json.loads(path.read_text())["runs"][0]["results"]
    return results


def test_valid_files_pass_and_the_sarif_report_names_the_rules(runner: Runner) -> None:
    code, printed, outputs = runner.run({"paths": "deploy/good.yaml\ndeploy/latest.yaml"}, VALIDATE)
    assert code == 0, printed
    assert "2 TrussiumRuntime(s) in 2 file(s): 2 valid, 0 invalid" in printed
    report = runner.workspace / outputs["sarif"]
    (warning,) = sarif_results(report)
    assert (warning["ruleId"], warning["level"]) == ("MutableImageTag", "warning")
    rules = json.loads(report.read_text())["runs"][0]["tool"]["driver"]["rules"]
    (rule,) = [r for r in rules if r["id"] == "MutableImageTag"]
    assert rule["helpUri"] == (
        "https://github.example/acme/trussium-operator/blob/v0.1.0/docs/webhook-rules.md#warnings"
    )


def test_strict_fails_on_the_warning(runner: Runner) -> None:
    code, printed, _ = runner.run(
        {"paths": "deploy", "strict": "true", "sarif": "strict.sarif"}, VALIDATE
    )
    assert code == 1, printed
    assert "deploy/latest.yaml: default/latest-tag: warning: spec.image.tag" in printed
    assert [r["level"] for r in sarif_results(runner.workspace / "strict.sarif")] == ["error"]


def test_an_invalid_file_fails_and_is_still_reported(runner: Runner) -> None:
    bad = runner.workspace / "deploy" / "bad.yaml"
    bad.write_text((SAMPLES / "invalid" / "autoscaling.yaml").read_text())
    try:
        code, printed, outputs = runner.run({"paths": "deploy"}, VALIDATE)
    finally:
        bad.unlink()
    assert code == 1, printed
    assert "deploy/bad.yaml: default/autoscaling: spec.autoscaling.enabled:" in printed
    rules = {r["ruleId"] for r in sarif_results(runner.workspace / outputs["sarif"])}
    assert {"AutoscalingBounds", "AutoscalingWithoutCPURequest"} <= rules
