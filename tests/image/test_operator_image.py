"""The operator image built here declares what the Dockerfile declares, and
holds what it should (and nothing it should not), read from the OCI tarball
without running it. tests/image/test_containers.py runs it.
"""

import json
import tarfile
import tomllib
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from hack.image.oci import Image, read_image
from tests.image.expectations import chart_containers, dockerfile_python, final_stage, pairs

pytestmark = pytest.mark.image

ROOT = Path(__file__).resolve().parents[2]
SITE = "usr/local/lib/python{version}/dist-packages"


@pytest.fixture(scope="module")
def tarball(operator_tarball: Path) -> Path:
    return operator_tarball


@pytest.fixture(scope="module")
def image(tarball: Path) -> Image:
    return read_image(tarball)


@cache
def layer_members(tarball: Path) -> dict[str, tarfile.TarInfo]:
    """Every path of the image's filesystem (upper layers win), without './'."""
    members: dict[str, tarfile.TarInfo] = {}
    with tarfile.open(tarball) as outer:
        for digest in read_image(tarball).layer_digests:
            blob = outer.extractfile(f"blobs/sha256/{digest.removeprefix('sha256:')}")
            with tarfile.open(fileobj=blob, mode="r:*") as layer:
                for member in layer:
                    members[member.name.removeprefix("./").rstrip("/")] = member
    return members


def test_config_declares_what_the_dockerfile_declares(image: Image) -> None:
    stage = final_stage()
    config: dict[str, Any] = image.config["config"]
    assert config["User"] == stage.arguments("USER")[-1]
    assert config["Cmd"] == json.loads(stage.arguments("CMD")[-1])
    entrypoints = stage.arguments("ENTRYPOINT")
    assert config.get("Entrypoint") == (json.loads(entrypoints[-1]) if entrypoints else None)
    workdirs = stage.arguments("WORKDIR")
    assert config.get("WorkingDir", "") == (workdirs[-1] if workdirs else "")
    exposed = {p if "/" in p else f"{p}/tcp" for a in stage.arguments("EXPOSE") for p in a.split()}
    assert set(config["ExposedPorts"]) == exposed
    assert config["Labels"] == pairs(stage.arguments("LABEL"))
    env = dict(entry.partition("=")[::2] for entry in config["Env"])
    assert pairs(stage.arguments("ENV")).items() <= env.items()
    # python:*-slim sets these two; the console scripts are found on PATH.
    assert env["LANG"] == "C.UTF-8"
    assert "/usr/local/bin" in env["PATH"].split(":")
    assert image.config["os"] == "linux"


def test_named_as_the_chart_installs_it(image: Image) -> None:
    images = {container["image"] for container in chart_containers()}
    assert images, "the chart renders Deployments"
    assert images <= set(image.names)


def test_python_is_the_dockerfiles_minor_version(tarball: Path) -> None:
    version = dockerfile_python()
    members = layer_members(tarball)
    assert f"usr/bin/python{version}" in members
    assert f"{SITE.format(version=version)}/webhook/__init__.py" in members


def test_console_scripts_run_the_image_python(tarball: Path) -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    members = layer_members(tarball)
    with tarfile.open(tarball) as outer:
        app = outer.extractfile(f"blobs/sha256/{read_image(tarball).layer_digests[-1][7:]}")
        with tarfile.open(fileobj=app, mode="r:*") as layer:
            for script in pyproject["project"]["scripts"]:
                member = members[f"usr/local/bin/{script}"]
                assert member.mode & 0o111, f"{script} is not executable"
                source = layer.extractfile(f"usr/local/bin/{script}")
                assert source is not None
                assert source.readline() == b"#!/usr/bin/python3\n"


def test_project_bytecode_is_compiled_at_build_time(tarball: Path) -> None:
    """The root filesystem is read-only at run time: no .pyc could be written then."""
    members = layer_members(tarball)
    site = SITE.format(version=dockerfile_python())
    tag = f"cpython-{dockerfile_python().replace('.', '')}"
    sources = [p for p in members if p.startswith(f"{site}/webhook/") and p.endswith(".py")]
    assert sources
    for source in sources:
        directory, _, name = source.rpartition("/")
        assert f"{directory}/__pycache__/{name[:-3]}.{tag}.pyc" in members, source


def test_ships_no_installer_build_tool_or_documentation(tarball: Path) -> None:
    members = layer_members(tarball)
    site = SITE.format(version=dockerfile_python())
    for package in ("pip", "setuptools", "wheel"):
        assert f"{site}/{package}" not in members, f"{package} is installed"
    for tool in ("pip", "pip3", "apt-get", "gcc", "cc", "make"):
        assert f"usr/bin/{tool}" not in members
        assert f"usr/local/bin/{tool}" not in members
    assert not [p for p in members if p.startswith("usr/share/man/") and members[p].isfile()]
    docs = [p for p in members if p.startswith("usr/share/doc/") and members[p].isfile()]
    assert docs, "licences are kept"
    assert all(p.endswith("/copyright") for p in docs)
    lists = [p for p in members if p.startswith("var/lib/apt/lists/") and members[p].size]
    assert not lists, "apt's package lists are shipped"
