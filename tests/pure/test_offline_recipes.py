"""The CI recipes of docs/offline-validation.md, taken from the page and run as
written (only the package installation step is left out), on a repository
layout with valid manifests and then with an invalid one added."""

import os
import re
import shlex
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import yaml

from devcluster.components import locate

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "offline-validation.md"
SAMPLES = REPO / "tests" / "samples"
RUNTIME = (SAMPLES / "valid" / "minimal.yaml").read_text()
INVALID = (SAMPLES / "invalid" / "autoscaling.yaml").read_text()


def yaml_blocks() -> list[Any]:
    text = PAGE.read_text()
    return [yaml.safe_load(block) for block in re.findall(r"```yaml\n(.*?)```", text, re.S)]


def github_commands() -> list[str]:
    commands: list[str] = []
    for block in yaml_blocks():
        steps = block["jobs"]["validate"]["steps"] if "jobs" in block else block
        if isinstance(steps, list) and all(isinstance(step, dict) for step in steps):
            commands += [step["run"] for step in steps if "run" in step]
    installs = [c for c in commands if c.startswith("pip install")]
    assert len(installs) == 1, commands
    return [c for c in commands if c not in installs]


def gitlab_job() -> dict[str, Any]:
    (job,) = [b["validate-manifests"] for b in yaml_blocks() if "validate-manifests" in b]
    assert isinstance(job, dict)
    return job


def pre_commit_hook() -> dict[str, Any]:
    """The page's hook, as this repository's .pre-commit-hooks.yaml defines it."""
    (block,) = [b for b in yaml_blocks() if isinstance(b, dict) and "repos" in b]
    (hook,) = block["repos"][0]["hooks"]
    defined = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())
    (definition,) = [h for h in defined if h["id"] == hook["id"]]
    assert isinstance(definition, dict)
    assert isinstance(hook, dict)
    return {**definition, **hook}


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A repository with runtimes in deploy/, a Helm chart and a kustomize overlay."""
    files = {
        "deploy/chat.yaml": RUNTIME.replace("name: minimal", "name: chat"),
        "deploy/team/batch.yml": RUNTIME.replace("name: minimal", "name: batch"),
        "deploy/service.yaml": "apiVersion: v1\nkind: Service\nmetadata: {name: s}\n",
        "chart/Chart.yaml": "apiVersion: v2\nname: app\nversion: 0.1.0\n",
        "chart/templates/runtime.yaml": RUNTIME.replace(
            "name: minimal", "name: {{ .Release.Name }}"
        ),
        "base/kustomization.yaml": "resources: [runtime.yaml]\n",
        "base/runtime.yaml": RUNTIME,
        "overlays/production/kustomization.yaml": "resources: [../../base]\nnamePrefix: prod-\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return tmp_path


def shell(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    path = os.pathsep.join(
        [str(Path(sys.executable).parent), str(locate().bin_dir), "/usr/bin:/bin"]
    )
    return subprocess.run(
        ["bash", "-o", "pipefail", "-c", command],
        cwd=cwd,
        env={"PATH": path, "HOME": str(cwd)},
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def test_github_actions_steps(checkout: Path) -> None:
    commands = github_commands()
    assert len(commands) == 3, commands
    for command in commands:
        result = shell(command, checkout)
        assert result.returncode == 0, (command, result.stdout, result.stderr)
        assert "1 valid" in result.stdout or "2 valid" in result.stdout, result.stdout
    (checkout / "deploy" / "broken.yaml").write_text(INVALID)
    strict = shell(commands[0], checkout)
    assert strict.returncode == 1
    assert "deploy/broken.yaml: default/autoscaling: spec.autoscaling" in strict.stdout


def test_gitlab_job_writes_a_junit_report_either_way(checkout: Path) -> None:
    job = gitlab_job()
    report = checkout / job["artifacts"]["reports"]["junit"]
    assert job["artifacts"]["when"] == "always"
    (command,) = job["script"]
    assert shell(command, checkout).returncode == 0
    assert ET.parse(report).getroot().get("failures") == "0"
    (checkout / "deploy" / "broken.yaml").write_text(INVALID)
    assert shell(command, checkout).returncode == 1
    suite = ET.parse(report).getroot()
    assert (suite.get("tests"), suite.get("failures")) == ("3", "1")


def test_pre_commit_hook_with_several_staged_files(checkout: Path) -> None:
    hook = pre_commit_hook()
    assert hook["language"] == "python"
    (checkout / "deploy" / "broken.yaml").write_text(INVALID)
    staged = ["deploy/chat.yaml", "deploy/team/batch.yml", "deploy/service.yaml", "README.md"]
    matching = [name for name in staged if re.search(hook["files"], name)]
    assert matching == staged[:3]
    entry = shlex.join([*shlex.split(hook["entry"]), *hook["args"]])
    assert shell(f"{entry} {shlex.join(matching)}", checkout).returncode == 0
    failing = shell(f"{entry} {shlex.join([*matching, 'deploy/broken.yaml'])}", checkout)
    assert failing.returncode == 1, failing.stderr
    assert "3 TrussiumRuntime(s) in 4 file(s): 2 valid, 1 invalid" in failing.stdout
