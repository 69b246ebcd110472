"""The Dockerfile, read: the one parser of it in the project.

The operator image built here takes its config (user, command, ports,
labels, environment) and the wheel's inputs (the builder stage's COPY
sources) from the Dockerfile, which stays the source of truth for users who
build with Docker. Only the plain forms the Dockerfile uses are understood;
anything else is an error rather than a guess.
"""

import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from hack.image.oci import ImageConfig

DOCKERFILE = Path(__file__).resolve().parents[2] / "Dockerfile"
# What python:*-slim itself puts in the environment (before the Dockerfile's ENV).
BASE_ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "LANG": "C.UTF-8",
}


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def arguments(self, keyword: str) -> list[str]:
        return [args for kw, args in self.instructions if kw == keyword]


def _logical_lines(text: str) -> list[str]:
    """Continuation lines joined, comments and blank lines dropped."""
    uncommented = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    return [line.strip() for line in re.sub(r"\\\n", " ", uncommented).splitlines() if line.strip()]


def parse_stages(text: str) -> list[Stage]:
    """Instructions grouped by build stage (keywords upper-cased)."""
    stages: list[Stage] = []
    for line in _logical_lines(text):
        keyword, _, args = line.partition(" ")
        keyword = keyword.upper()
        if keyword == "FROM":
            words = args.split()
            name = words[2] if len(words) == 3 and words[1].upper() == "AS" else None
            stages.append(Stage(base=words[0], name=name))
        elif stages:
            stages[-1].instructions.append((keyword, args.strip()))
    return stages


def global_args(text: str) -> dict[str, str]:
    """The `ARG NAME=default` lines before the first FROM."""
    args: dict[str, str] = {}
    for line in _logical_lines(text):
        keyword, _, rest = line.partition(" ")
        if keyword.upper() == "FROM":
            break
        if keyword.upper() == "ARG":
            name, _, default = rest.strip().partition("=")
            args[name] = default
    return args


def python_version(text: str) -> str:
    """The minor Python version of the base image (`python:3.11-slim` -> `3.11`)."""
    match = re.fullmatch(r"python:(\d+\.\d+)[-.\w]*", global_args(text).get("PYTHON_IMAGE", ""))
    if match is None:
        raise ValueError("the Dockerfile names no python:X.Y base image in ARG PYTHON_IMAGE")
    return match.group(1)


def _pairs(arguments: list[str], values: dict[str, str]) -> dict[str, str]:
    """`KEY=value` words of LABEL or ENV instructions, quotes removed, ARGs substituted."""
    found: dict[str, str] = {}
    for args in arguments:
        for word in shlex.split(args):
            key, equals, value = word.partition("=")
            if not equals:
                raise ValueError(f"only the KEY=value form is understood, not {args!r}")
            found[key] = re.sub(r"\$\{(\w+)\}", lambda m: values.get(m[1], m[0]), value)
    return found


def _exec_form(stage: Stage, keyword: str) -> tuple[str, ...]:
    instructions = stage.arguments(keyword)
    if not instructions:
        return ()
    try:
        words = json.loads(instructions[-1])
    except json.JSONDecodeError:
        words = None
    if not isinstance(words, list):
        raise ValueError(f"{keyword} must use the exec (JSON) form, not {instructions[-1]!r}")
    return tuple(str(word) for word in words)


def image_config(text: str) -> ImageConfig:
    """The final stage's image config, with its ARGs at their defaults."""
    final = parse_stages(text)[-1]
    defaults = global_args(text)
    values: dict[str, str] = {}
    for declared in final.arguments("ARG"):
        name, equals, default = declared.partition("=")
        values[name] = default if equals else defaults.get(name, "")
    users = final.arguments("USER")
    workdirs = final.arguments("WORKDIR")
    ports = [port for args in final.arguments("EXPOSE") for port in args.split()]
    return ImageConfig(
        user=users[-1] if users else "",
        entrypoint=_exec_form(final, "ENTRYPOINT"),
        cmd=_exec_form(final, "CMD"),
        workdir=workdirs[-1] if workdirs else "",
        env=BASE_ENV | _pairs(final.arguments("ENV"), values),
        exposed_ports=tuple(port if "/" in port else f"{port}/tcp" for port in ports),
        labels=_pairs(final.arguments("LABEL"), values),
    )


def builder_copies(text: str) -> list[tuple[str, str]]:
    """(source, destination relative to the build directory) of the first stage's COPYs."""
    copies: list[tuple[str, str]] = []
    for args in parse_stages(text)[0].arguments("COPY"):
        *sources, destination = args.split()
        if not sources or any(word.startswith("--") for word in args.split()):
            raise ValueError(f"only plain COPY <sources> <destination> is understood: {args!r}")
        target = destination.removeprefix("./")
        into_directory = target.endswith("/") or not target
        for source in sources:
            copies.append((source, target + Path(source).name if into_directory else target))
    return copies
