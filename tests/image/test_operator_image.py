"""The operator image built here declares what the Dockerfile declares, and
holds what it should (and nothing it should not), read from the OCI tarball
without running it. tests/image/test_containers.py runs it.
"""

import tarfile
import tomllib
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from hack.image.dockerfile import DOCKERFILE, image_config, python_version
from hack.image.oci import Image, read_image
from tests.image.chart import chart_containers

pytestmark = pytest.mark.image

ROOT = Path(__file__).resolve().parents[2]
PYTHON = python_version(DOCKERFILE.read_text())
SITE = f"usr/local/lib/python{PYTHON}/dist-packages"


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
    declared = image_config(DOCKERFILE.read_text())
    config: dict[str, Any] = image.config["config"]
    assert config["User"] == declared.user
    assert config["Cmd"] == list(declared.cmd)
    assert config.get("Entrypoint") == (list(declared.entrypoint) or None)
    assert config.get("WorkingDir", "") == declared.workdir
    assert set(config["ExposedPorts"]) == set(declared.exposed_ports)
    assert config["Labels"] == declared.labels
    assert dict(entry.partition("=")[::2] for entry in config["Env"]) == declared.env
    assert image.config["os"] == "linux"


def test_the_dockerfile_is_read_as_written() -> None:
    """The facts the chart and the cluster rely on, as the Dockerfile spells them."""
    declared = image_config(DOCKERFILE.read_text())
    assert declared.user == "65532:65532"
    assert declared.cmd == ("trussium-controller", "run")
    assert not declared.entrypoint
    assert set(declared.exposed_ports) == {"8081/tcp", "8443/tcp", "9443/tcp"}
    version = (ROOT / "VERSION").read_text().strip()
    assert declared.labels["org.opencontainers.image.version"] == version
    assert declared.env["HOME"] == "/tmp"
    assert declared.env["PYTHONDONTWRITEBYTECODE"] == "1"
    assert "/usr/local/bin" in declared.env["PATH"].split(":")


def test_named_as_the_chart_installs_it(image: Image) -> None:
    images = {container["image"] for container in chart_containers()}
    assert images, "the chart renders Deployments"
    assert images <= set(image.names)


def test_python_is_the_dockerfiles_minor_version(tarball: Path) -> None:
    members = layer_members(tarball)
    assert f"usr/bin/python{PYTHON}" in members
    assert f"{SITE}/trussium_operator/webhook/__init__.py" in members


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
    tag = f"cpython-{PYTHON.replace('.', '')}"
    sources = [
        p
        for p in members
        if p.startswith(f"{SITE}/trussium_operator/webhook/") and p.endswith(".py")
    ]
    assert sources
    for source in sources:
        directory, _, name = source.rpartition("/")
        assert f"{directory}/__pycache__/{name[:-3]}.{tag}.pyc" in members, source


def test_ships_no_installer_build_tool_or_documentation(tarball: Path) -> None:
    members = layer_members(tarball)
    for package in ("pip", "setuptools", "wheel"):
        assert f"{SITE}/{package}" not in members, f"{package} is installed"
    for tool in ("pip", "pip3", "apt-get", "gcc", "cc", "make"):
        assert f"usr/bin/{tool}" not in members
        assert f"usr/local/bin/{tool}" not in members
    assert not [p for p in members if p.startswith("usr/share/man/") and members[p].isfile()]
    docs = [p for p in members if p.startswith("usr/share/doc/") and members[p].isfile()]
    assert docs, "licences are kept"
    assert all(p.endswith("/copyright") for p in docs)
    lists = [p for p in members if p.startswith("var/lib/apt/lists/") and members[p].size]
    assert not lists, "apt's package lists are shipped"
