"""What both programs do alike, run as a user runs them: `--version`, the TRUSSIUM_*
variables in `--help`, and one-line errors with exit code 2 for a bad configuration."""

import argparse
import importlib.metadata
import os
import subprocess
import sys
from pathlib import Path

import pytest

from trussium_operator.cmdline.options import env_name
from trussium_operator.controller import cli as controller_cli
from trussium_operator.webhook import cli as webhook_cli

SCRIPTS = Path(sys.executable).parent
PROGRAMS = ["trussium-webhook", "trussium-controller"]
SERVE = ["serve", "--operator-username", "system:serviceaccount:ops:operator"]


def run(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("TRUSSIUM_")}
    return subprocess.run(
        [str(SCRIPTS / argv[0]), *argv[1:]],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        env=clean | {"KUBECONFIG": "/nonexistent"} | (env or {}),
    )


def assert_one_line_error(result: subprocess.CompletedProcess[str], program: str) -> None:
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith(f"{program}: error: "), result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("program", PROGRAMS)
def test_version(program: str) -> None:
    result = run(program, "--version")
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == f"{program} {importlib.metadata.version('trussium-operator')}\n"


def subcommand(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    (choices,) = [a.choices for a in parser._actions if isinstance(a.choices, dict)]
    chosen: argparse.ArgumentParser = choices[name]
    return chosen


@pytest.mark.parametrize(
    ("program", "command", "parser"),
    [
        ("trussium-webhook", "serve", webhook_cli.build_parser),
        ("trussium-controller", "run", controller_cli.parser),
    ],
)
def test_help_lists_every_flags_variable_and_each_is_read(
    program: str,
    command: str,
    parser: "type[argparse.ArgumentParser]",
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    shown = run(program, command, "--help").stdout
    actions = [
        action
        for action in subcommand(parser(), command)._actions
        if any(flag.startswith("--") for flag in action.option_strings) and action.dest != "help"
    ]
    assert len(actions) > 10
    for action in actions:
        flag = next(f for f in action.option_strings if f.startswith("--"))
        variable = env_name(flag)
        assert f"  {variable}" in shown, variable
        if isinstance(action, argparse._AppendAction):
            continue  # comma-separated lists, read when the command starts
        value = _other_value(action)
        monkeypatch.setenv(variable, value)
        parsed = getattr(subcommand(parser(), command).parse_args([]), action.dest)
        monkeypatch.delenv(variable)
        assert str(parsed).lower() in (value, f"{value}.0"), (variable, parsed)


def _other_value(action: argparse.Action) -> str:
    """A valid value for the flag that differs from its default."""
    if action.choices:
        return str(next(c for c in action.choices if c != action.default))
    if isinstance(action.default, bool):  # --flag/--no-flag, --flag, --flag[=BOOL]
        return "false" if action.default else "true"
    if action.type in (int, float):
        return "7"
    return "/from/the/environment"


def test_a_bad_kubeconfig_is_one_line_exit_2(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\nclusters: [\n")
    for path in (kubeconfig, tmp_path / "absent"):
        result = run("trussium-controller", "run", "--kubeconfig", str(path))
        assert_one_line_error(result, "trussium-controller")
        assert f"--kubeconfig {path}" in result.stderr
        result = run(
            "trussium-webhook", *SERVE, "--kubeconfig", str(path), env={"POD_NAMESPACE": "ops"}
        )
        assert_one_line_error(result, "trussium-webhook")
    # No flag, not in a cluster, KUBECONFIG unusable: the client logs why, then one error line.
    result = run("trussium-controller", "run")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert result.stderr.splitlines()[-1].startswith("trussium-controller: error: cannot use")


@pytest.mark.parametrize("program", PROGRAMS)
def test_a_malformed_bind_address_is_refused_before_anything_starts(program: str) -> None:
    command = SERVE if program == "trussium-webhook" else ["run"]
    result = run(
        program,
        *command,
        env={"TRUSSIUM_HEALTH_PROBE_BIND_ADDRESS": "8081", "TRUSSIUM_HEALTH_BIND_ADDRESS": "8081"},
    )
    assert_one_line_error(result, program)
    assert "expected HOST:PORT, got '8081'" in result.stderr


@pytest.mark.parametrize(
    ("argv", "variables"),
    [
        (["trussium-controller", "run"], {"TRUSSIUM_LEADER_ELECT": "maybe"}),
        (["trussium-controller", "run"], {"TRUSSIUM_WORKERS": "many"}),
        (["trussium-controller", "run", "--workers", "0"], {}),
        (["trussium-webhook", *SERVE], {"TRUSSIUM_SHUTDOWN_DELAY": "soon"}),
        (["trussium-webhook", *SERVE], {"TRUSSIUM_SECRET_LOOKUP": "maybe"}),
        (["trussium-webhook", *SERVE, "--bind-address", "9443"], {}),
        (["trussium-webhook", *SERVE, "--cert-dir", "/nonexistent"], {}),
        (["trussium-webhook", "serve"], {}),
    ],
    ids=[
        "bool-variable",
        "int-variable",
        "workers",
        "float-variable",
        "webhook-bool-variable",
        "address",
        "cert-dir",
        "operator-username",
    ],
)
def test_bad_flags_and_variables_are_one_line_exit_2(
    argv: list[str], variables: dict[str, str]
) -> None:
    result = run(*argv, env=variables)
    program = argv[0]
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith(program), result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
