"""The three images: what goes into each, their configs and default names."""

import os
import platform
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from hack.image import debian
from hack.image.cache import Key, cache_dir, locked, prune, source_files, used
from hack.image.dockerfile import (
    BASE_ENV,
    DOCKERFILE,
    builder_copies,
    image_config,
    python_version,
)
from hack.image.oci import SOURCE_DATE_EPOCH, ImageConfig, Layer, assemble, pack, write_layer

HERE = Path(__file__).resolve().parent
# The build code that shapes an image's content (not the cache or the CLI): part of every key.
CONTENT_CODE = ("images.py", "oci.py", "debian.py", "dockerfile.py")
REPO = HERE.parents[1]
ARCHITECTURES = {"x86_64": "amd64", "aarch64": "arm64"}
STEP_TIMEOUT_SECONDS = 1800

PATH = BASE_ENV["PATH"]

# The runtime image the examples and the demo use (0.9.0, upgraded to 0.9.1).
STANDIN_REPOSITORY = "ghcr.io/trussiumhq/trussium"
STANDIN_TAGS = ("0.9.0", "0.9.1")
STANDIN_BINARY = "trussium-standin"
STANDIN_CONFIG = ImageConfig(
    # The runtime contract's identity (docs/contract.md section 4: runAsUser 10001).
    user="10001:10001",
    entrypoint=(f"/{STANDIN_BINARY}",),
    exposed_ports=("9000/tcp",),
    labels={
        "org.opencontainers.image.title": "trussium-standin",
        "org.opencontainers.image.description": (
            "Stand-in for the Trussium runtime in local tests; not the real runtime"
        ),
    },
)
# containerd's default sandbox image; the node profile's containerd is configured with it.
PAUSE_NAME = "registry.k8s.io/pause:3.10"
PAUSE_CONFIG = ImageConfig(user="65535:65535", entrypoint=("/pause",))


def _architecture() -> str:
    machine = platform.machine()
    if machine not in ARCHITECTURES:
        raise RuntimeError(f"no image build for {machine}")
    return ARCHITECTURES[machine]


def _run(
    argv: Sequence[str], cwd: Path | None = None, env: Mapping[str, str] | None = None
) -> None:
    subprocess.run(argv, check=True, timeout=STEP_TIMEOUT_SECONDS, cwd=cwd, env=env)


# --- the Go images: one static binary each, on an empty base


def _go_binary(package: str, out: Path) -> None:
    env = {**os.environ, "CGO_ENABLED": "0", "GOTOOLCHAIN": "local", "GOFLAGS": "-trimpath"}
    _run(
        ["go", "build", "-ldflags=-s -w -buildid=", "-o", str(out), f"./{package}"],
        cwd=HERE,
        env=env,
    )


def _go_version() -> str:
    result = subprocess.run(
        ["go", "env", "GOVERSION"], check=True, capture_output=True, text=True, timeout=60
    )
    return result.stdout.strip()


def _go_inputs(package: str) -> Callable[[Key], None]:
    def inputs(key: Key) -> None:
        key.text("go", _go_version()).files(HERE, source_files(HERE, ["go.mod", package]))

    return inputs


def _go_layers(package: str, binary: str) -> Callable[[Path], list[Layer]]:
    def layers(work: Path) -> list[Layer]:
        root = work / "root"
        root.mkdir()
        _go_binary(package, root / binary)
        archive = work / "layer.tar"
        write_layer(archive, root, [binary], owner=(0, 0))
        return [Layer(archive, f"go build ./{package} (CGO_ENABLED=0)")]

    return layers


# --- the operator image: Debian base + the project's wheels


def _operator_inputs(key: Key) -> None:
    key.text("base", debian.base_key())
    sources = [source for source, _ in builder_copies(DOCKERFILE.read_text())]
    key.files(REPO, source_files(REPO, sources))


def _chroot_python(rootfs: Path, *args: str) -> None:
    env = {
        "PATH": PATH,
        "HOME": "/root",
        "LANG": "C.UTF-8",
        # Reproducible bytecode: checked-hash .pyc files instead of timestamps.
        "SOURCE_DATE_EPOCH": str(SOURCE_DATE_EPOCH),
        "PYTHONHASHSEED": "0",
    }
    _run(["chroot", str(rootfs), "/usr/bin/python3", *args], env=env)


def _interpreter(rootfs: Path) -> tuple[str, tuple[int, int]]:
    """The base's Python version ("3.11") and C library version, for choosing wheels."""
    probe = "import platform, sys; print(*sys.version_info[:2], platform.libc_ver()[1])"
    result = subprocess.run(
        ["chroot", str(rootfs), "/usr/bin/python3", "-c", probe],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    )
    major, minor, libc = result.stdout.split()
    libc_major, libc_minor = libc.split(".")[:2]
    return f"{major}.{minor}", (int(libc_major), int(libc_minor))


def _pip(*args: str) -> None:
    # SOURCE_DATE_EPOCH also fixes the timestamps inside the project's wheel.
    env = {**os.environ, "SOURCE_DATE_EPOCH": str(SOURCE_DATE_EPOCH)}
    _run([sys.executable, "-m", "pip", "--disable-pip-version-check", "--quiet", *args], env=env)


def _fetch_wheels(rootfs: Path, wheels: Path, work: Path) -> Path:
    """Build the project's wheel like the Dockerfile's builder stage; fetch the
    wheels of its locked dependencies (requirements.lock, hashes checked) for the
    base's interpreter. Returns the project wheel."""
    source = work / "src"
    for path, destination in builder_copies(DOCKERFILE.read_text()):
        src, dst = REPO / path, source / destination
        if src.is_dir():
            shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)
    _pip("wheel", "--no-deps", "--wheel-dir", str(wheels), str(source))
    (project,) = wheels.glob("trussium_operator-*.whl")
    python, (libc_major, libc_minor) = _interpreter(rootfs)
    wanted = python_version(DOCKERFILE.read_text())
    if python != wanted:
        raise RuntimeError(f"the base has Python {python}; the Dockerfile's base has {wanted}")
    machine = platform.machine()
    platforms = [f"manylinux_{libc_major}_{m}_{machine}" for m in range(libc_minor, 16, -1)]
    _pip(
        "download",
        "--only-binary=:all:",
        f"--python-version={python}",
        "--implementation=cp",
        *(f"--platform={tag}" for tag in [*platforms, f"manylinux2014_{machine}"]),
        "--dest",
        str(wheels),
        "--no-deps",
        "--require-hashes",
        "--requirement",
        str(source / "requirements.lock"),
    )
    return project


def _operator_layers(work: Path) -> list[Layer]:
    if os.geteuid() != 0:
        raise RuntimeError("building the operator image needs root (chroot into the base)")
    base = debian.base_archive()
    rootfs = work / "rootfs"
    rootfs.mkdir()
    _run(["tar", "--numeric-owner", "-xpf", str(base), "-C", str(rootfs)])
    wheels = rootfs / "tmp" / "wheels"
    project = _fetch_wheels(rootfs, wheels, work)
    # pip runs from its wheel, unpacked outside site-packages, and is never installed:
    # the Dockerfile's final stage ends with `pip uninstall pip setuptools wheel`.
    pip_wheels = work / "pip"
    _pip("download", "--no-deps", "--only-binary=:all:", "--dest", str(pip_wheels), "pip")
    (pip_wheel,) = pip_wheels.glob("pip-*.whl")
    with zipfile.ZipFile(pip_wheel) as archive:
        archive.extractall(rootfs / "tmp" / "pip")
    _chroot_python(
        rootfs,
        "/tmp/pip/pip",
        "install",
        "--quiet",
        "--no-index",
        "--find-links=/tmp/wheels",
        "--no-cache-dir",
        "--break-system-packages",
        "--root-user-action=ignore",
        "--disable-pip-version-check",
        f"/tmp/wheels/{project.name}",
    )
    shutil.rmtree(wheels)
    shutil.rmtree(rootfs / "tmp" / "pip")
    app = work / "app.tar"
    write_layer(app, rootfs, ["usr/local"], owner=None)
    return [
        Layer(base, f"mmdebstrap {debian.SUITE} ({', '.join(debian.PACKAGES)})"),
        Layer(app, f"pip install --no-index {project.name} (and its dependencies)"),
    ]


def _operator_names() -> tuple[str, ...]:
    """The chart's default image: values.yaml's registry and repository, tag defaulting
    to appVersion (as the chart's image helper composes them)."""
    chart = REPO / "charts" / "trussium-operator"
    image = yaml.safe_load((chart / "values.yaml").read_text())["image"]
    app_version = yaml.safe_load((chart / "Chart.yaml").read_text())["appVersion"]
    repository = "/".join(part for part in (image["registry"], image["repository"]) if part)
    return (f"{repository}:{image['tag'] or app_version}",)


@dataclass(frozen=True)
class Recipe:
    inputs: Callable[[Key], None]
    layers: Callable[[Path], list[Layer]]
    config: Callable[[], ImageConfig]
    default_names: Callable[[], tuple[str, ...]]


RECIPES = {
    "operator": Recipe(
        _operator_inputs,
        _operator_layers,
        lambda: image_config(DOCKERFILE.read_text()),
        _operator_names,
    ),
    "standin": Recipe(
        _go_inputs("standin"),
        _go_layers("standin", STANDIN_BINARY),
        lambda: STANDIN_CONFIG,
        lambda: tuple(f"{STANDIN_REPOSITORY}:{tag}" for tag in STANDIN_TAGS),
    ),
    "pause": Recipe(
        _go_inputs("pause"),
        _go_layers("pause", "pause"),
        lambda: PAUSE_CONFIG,
        lambda: (PAUSE_NAME,),
    ),
}


def tarball_path(image: str, names: Sequence[str] = ()) -> Path:
    """Where `image` with these names (default: its default names) is cached."""
    recipe = RECIPES[image]
    key = Key().files(HERE, source_files(HERE, CONTENT_CODE))
    key.text("image", image).text("config", repr(recipe.config()))
    key.text("names", "\n".join(names or recipe.default_names()))
    recipe.inputs(key)
    return cache_dir() / f"{image}-{key.hexdigest()}.tar"


def build(image: str, names: Sequence[str] = ()) -> Path:
    """The image's OCI tarball, built unless the cache already holds it."""
    recipe = RECIPES[image]
    names = tuple(names or recipe.default_names())
    out = tarball_path(image, names)
    if out.exists():
        return used(out)
    with locked(image):
        if out.exists():
            return used(out)
        with tempfile.TemporaryDirectory(dir=out.parent, prefix=f".{image}-") as scratch:
            work = Path(scratch)
            layers = recipe.layers(work)
            assemble(work / "layout", layers, recipe.config(), _architecture())
            pack(work / "layout", names, out)
        prune(image, keep=out)
    return out
