"""The container image contract, checked without a Docker engine.

No engine runs in CI, so the Dockerfile is linted with hadolint and parsed
here: the facts a cluster admin relies on (numeric non-root user, both
programs present, no build tools shipped, a clean build context) are
asserted on the instructions themselves.
"""

import fnmatch
import json
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from hack.image.dockerfile import DOCKERFILE, Stage, parse_stages

ROOT = Path(__file__).resolve().parents[2]
BUILD_TOOLS = ("gcc", "g++", "cc", "make", "build-essential", "clang", "cmake", "rustc", "cargo")


def console_scripts() -> dict[str, str]:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    scripts: dict[str, str] = pyproject["project"]["scripts"]
    return scripts


def packaged_modules() -> list[str]:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    includes: list[str] = pyproject["tool"]["setuptools"]["packages"]["find"]["include"]
    return [pattern.rstrip("*") for pattern in includes]


def dockerignore_patterns() -> list[str]:
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def ignored(path: str, patterns: list[str]) -> bool:
    """Whether the build context drops `path`: a pattern matching it or a parent does."""
    parts = path.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    return any(
        fnmatch.fnmatch(prefix, pattern.removeprefix("**/"))
        for prefix in prefixes
        for pattern in patterns
    )


@pytest.fixture(scope="module")
def stages() -> list[Stage]:
    return parse_stages(DOCKERFILE.read_text())


def test_hadolint_reports_nothing() -> None:
    hadolint = Path(sys.executable).parent / "hadolint"
    result = subprocess.run(
        [str(hadolint), "--failure-threshold", "style", "--no-color", str(DOCKERFILE)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_is_multi_stage_on_slim_python(stages: list[Stage]) -> None:
    assert len(stages) >= 2
    assert stages[0].name == "builder"
    text = DOCKERFILE.read_text()
    assert re.search(r"^ARG PYTHON_IMAGE=python:3\.11-slim$", text, re.MULTILINE)
    assert all(stage.base == "${PYTHON_IMAGE}" for stage in stages)


def test_final_stage_runs_as_numeric_non_root_user(stages: list[Stage]) -> None:
    users = stages[-1].arguments("USER")
    assert users, "the final stage must set USER"
    user, _, group = users[-1].partition(":")
    assert user.isdigit(), f"USER {users[-1]!r} must be numeric (runAsNonRoot needs a UID)"
    assert int(user) != 0
    assert group.isdigit(), f"USER {users[-1]!r} must name a numeric group"
    assert int(group) != 0


def test_final_stage_installs_the_project_wheel_only(stages: list[Stage]) -> None:
    final = stages[-1]
    runs = " ".join(final.arguments("RUN"))
    assert "from=builder" in runs
    assert re.search(r"/wheels/trussium_operator-\S*\.whl", runs)
    assert "--no-index" in runs, "the final stage must not fetch anything from an index"
    copies = " ".join(final.arguments("COPY") + final.arguments("ADD"))
    assert not copies, "the final stage copies nothing: no source tree in the image"


def test_final_stage_ships_no_build_tools(stages: list[Stage]) -> None:
    words = {word for run in stages[-1].arguments("RUN") for word in shlex.split(run)}
    assert not words & set(BUILD_TOOLS)
    assert not words & {"apt-get", "apt", "apk"}, "no package installs in the final stage"


def test_runtime_environment_needs_no_writable_paths(stages: list[Stage]) -> None:
    env = " ".join(stages[-1].arguments("ENV"))
    assert "PYTHONDONTWRITEBYTECODE=1" in env
    assert "PYTHONUNBUFFERED=1" in env


def test_default_command_is_a_console_script_of_the_project(stages: list[Stage]) -> None:
    scripts = console_scripts()
    assert {"trussium-webhook", "trussium-controller"} <= scripts.keys()
    assert not stages[-1].arguments("ENTRYPOINT"), "the chart picks the program via `command`"
    command = json.loads(stages[-1].arguments("CMD")[-1])
    assert command[0] in scripts


def test_builder_copies_every_packaged_module(stages: list[Stage]) -> None:
    """The package and every folder its symlinks point to (ADR 0023)."""
    copied = {src for args in stages[0].arguments("COPY") for src in args.split()[:-1]}
    assert packaged_modules() == ["trussium_operator"]
    package = ROOT / "trussium_operator"
    links = [p for p in package.iterdir() if p.is_symlink()]
    assert {link.name for link in links} == {
        "common",
        "webhook",
        "controller",
        "certs",
        "cmdline",
        "serving",
        "offline",
    }
    for path in [package, *links]:
        source = str(path.resolve().relative_to(ROOT))
        assert source in copied, f"the wheel would lack {source}"


def test_builder_installs_the_locked_dependencies_only(stages: list[Stage]) -> None:
    runs = " ".join(stages[0].arguments("RUN"))
    assert "pip wheel --require-hashes --wheel-dir /wheels -r requirements.lock" in runs
    assert "pip wheel --no-deps" in runs, "the project's own wheel resolves nothing"


def test_dockerignore_keeps_local_state_out_but_build_inputs_in(stages: list[Stage]) -> None:
    patterns = dockerignore_patterns()
    for path in (".venv/bin/python", ".git/HEAD", "tests/pure/test_dockerfile.py"):
        assert ignored(path, patterns), f"{path} would be sent to the build"
    sources = {src for args in stages[0].arguments("COPY") for src in args.split()[:-1]}
    for source in sources:
        assert not ignored(source, patterns), (
            f".dockerignore drops {source}, which the build copies"
        )
