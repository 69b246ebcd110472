"""Flags both programs treat alike: environment defaults, `--version`, configuration errors.

Every long flag of `trussium-webhook serve` and `trussium-controller run` can
be set as `TRUSSIUM_<FLAG_IN_UPPER_SNAKE>` (repeatable flags: comma-separated),
so the chart can configure them either way; an explicit flag wins. The
variables are listed in each command's `--help`, built from its flags.
"""

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any, NoReturn, TypeAlias

ENV_PREFIX = "TRUSSIUM_"
LOG_FORMATS = ("json", "text")
LOG_LEVELS = ("debug", "info", "warning", "error")
# Exit code for a configuration the program cannot start with (as argparse's usage errors).
CONFIGURATION_ERROR = 2
_NOT_FROM_ENVIRONMENT = {"--help", "--version"}


def package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version  # only when asked: start-up

    try:
        return version("trussium-operator")
    except PackageNotFoundError:
        return "unknown"


def env_name(flag: str) -> str:
    """`--bind-address` -> `TRUSSIUM_BIND_ADDRESS`."""
    return ENV_PREFIX + flag.removeprefix("--").replace("-", "_").upper()


def env(flag: str, default: str | None = None) -> str | None:
    """The value of the flag's variable (`--bind-address`: TRUSSIUM_BIND_ADDRESS), else
    `default`: what the flag means when the command line does not give it."""
    return os.environ.get(env_name(flag), default)


def add_flag(parser: argparse.ArgumentParser, flag: str, **options: Any) -> None:
    """Add `flag`, its default overridden by its variable when that is set, so each
    flag is named once."""
    value = env(flag)
    if value is not None:
        options["default"] = value
    parser.add_argument(flag, **options)


def env_list(flag: str, default: Sequence[str] = ()) -> list[str]:
    """A repeatable flag's variable: comma-separated items, else `default`."""
    value = env(flag)
    return [item.strip() for item in value.split(",") if item.strip()] if value else list(default)


def boolean(value: str) -> bool:
    """true/false, 1/0, yes/no, on/off, in any case; ValueError for anything else."""
    if value.lower() in ("1", "true", "yes", "on"):
        return True
    if value.lower() in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"not a boolean: {value!r}")


def env_bool(flag: str, default: bool) -> bool:
    """A boolean flag's variable (see `boolean`), else `default`."""
    value = env(flag)
    if value is None:
        return default
    try:
        return boolean(value)
    except ValueError as error:
        raise ConfigurationError(f"{env_name(flag)}: {error}") from None


class ArgumentParser(argparse.ArgumentParser):
    """argparse, with a usage error in one line instead of the whole usage text."""

    def error(self, message: str) -> NoReturn:
        self.exit(CONFIGURATION_ERROR, f"{self.prog}: error: {message} (see --help)\n")


Subcommands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


class ConfigurationError(Exception):
    """Settings the program cannot start with; reported in one line, exit code 2."""


def list_environment(parser: argparse.ArgumentParser) -> None:
    """Append the command's TRUSSIUM_* variables to its `--help`."""
    flags = [
        flag
        for action in parser._actions
        for flag in [next((f for f in action.option_strings if f.startswith("--")), "")]
        if flag and flag not in _NOT_FROM_ENVIRONMENT
    ]
    width = max(len(env_name(flag)) for flag in flags)
    lines = [f"  {env_name(flag):<{width}}  {flag}" for flag in flags]
    parser.epilog = (
        "environment (an explicit flag wins; repeatable flags take a comma-separated list):\n"
        + "\n".join(lines)
    )
    parser.formatter_class = argparse.RawDescriptionHelpFormatter


class _Version(argparse.Action):
    """argparse's `version` action, with the version read only when it is asked for."""

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        print(f"{parser.prog} {package_version()}")
        parser.exit()


def add_version(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--version", action=_Version, nargs=0, help="show program's version number and exit"
    )


def fail(program: str, message: object) -> int:
    """Report a configuration error in one line (never a traceback); the exit code."""
    print(f"{program}: error: {' '.join(str(message).split())}", file=sys.stderr)
    return CONFIGURATION_ERROR
