"""The hook of .pre-commit-hooks.yaml, installed and run by pre-commit itself.

pre-commit clones this repository at a commit (a snapshot of the working
tree), builds and installs the package in a virtualenv of its own, and runs
the hook on the staged files of a sample repository: a good runtime passes,
a bad one fails with its field path. The package's dependencies come from
the test's environment rather than PyPI (`installed_dependencies`), which
keeps the test within seconds (docs/adr/0041).
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.support.repository_snapshot import (
    GIT_IDENTITY,
    REPO,
    git,
    installed_dependencies,
    snapshot,
)

SAMPLES = REPO / "tests" / "samples"
HOOKS = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A repository with a good and a bad TrussiumRuntime, using the hook, installed."""
    root = tmp_path_factory.mktemp("precommit")
    rev = snapshot(root / "hook-repository")
    work = root / "work"
    (work / "deploy").mkdir(parents=True)
    (work / "deploy" / "good.yaml").write_text((SAMPLES / "valid" / "minimal.yaml").read_text())
    (work / "deploy" / "bad.yaml").write_text(
        (SAMPLES / "invalid" / "autoscaling.yaml").read_text()
    )
    config = {
        "repos": [
            {
                "repo": f"file://{root / 'hook-repository'}",
                "rev": rev,
                "hooks": [{"id": "trussium-validate"}],
            }
        ]
    }
    (work / ".pre-commit-config.yaml").write_text(yaml.safe_dump(config))
    git(work, "init", "-q")
    git(work, "add", "-A")
    env = {
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), "/usr/bin:/bin"]),
        "HOME": str(root),
        "PRE_COMMIT_HOME": str(root / "pre-commit-home"),
        **installed_dependencies(),
        **GIT_IDENTITY,
    }
    install = pre_commit(work, env, "install-hooks")
    assert install.returncode == 0, install.stdout + install.stderr
    return work, env


def pre_commit(work: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pre_commit", *args],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )


def test_the_hook_is_a_python_hook_of_the_console_script() -> None:
    (hook,) = HOOKS
    assert hook["language"] == "python"
    assert hook["entry"].split()[0] == "trussium-webhook"
    assert "trussium-webhook" in (REPO / "pyproject.toml").read_text()


def test_a_valid_runtime_passes(sample: tuple[Path, dict[str, str]]) -> None:
    work, env = sample
    result = pre_commit(work, env, "run", "--files", "deploy/good.yaml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Passed" in result.stdout


def test_an_invalid_runtime_fails_with_its_field_path(
    sample: tuple[Path, dict[str, str]],
) -> None:
    work, env = sample
    result = pre_commit(work, env, "run", "--all-files")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Failed" in result.stdout
    assert "deploy/bad.yaml: default/autoscaling: spec.autoscaling.enabled:" in result.stdout
    # The two runtimes, and .pre-commit-config.yaml: YAML, and no runtime.
    assert "2 TrussiumRuntime(s) in 3 file(s): 1 valid, 1 invalid" in result.stdout
