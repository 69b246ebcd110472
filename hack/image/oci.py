"""OCI image layouts: reproducible layer archives, assembly with umoci, and the
tarball containerd imports.

umoci (a Debian package) writes the blobs, manifest and config; this module
only makes the layer archives deterministic and names the manifest for
containerd, whose importer reads `io.containerd.image.name` from index.json.
"""

import json
import os
import subprocess
import tarfile
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

# Every timestamp in an image (file times, config and history dates) is this
# one, so the same inputs always give the same digests.
SOURCE_DATE_EPOCH = 0
CREATED = "1970-01-01T00:00:00Z"
CONTAINERD_NAME = "io.containerd.image.name"
REF_NAME = "org.opencontainers.image.ref.name"
INTERNAL_TAG = "build"
UMOCI_TIMEOUT_SECONDS = 600


@dataclass(frozen=True)
class ImageConfig:
    """The parts of an OCI image config a Dockerfile declares."""

    user: str
    entrypoint: tuple[str, ...] = ()
    cmd: tuple[str, ...] = ()
    workdir: str = ""
    env: Mapping[str, str] = field(default_factory=dict)
    exposed_ports: tuple[str, ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Layer:
    """An uncompressed layer archive and the history line that explains it."""

    archive: Path
    created_by: str


def _normalise(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.mtime = min(int(info.mtime), SOURCE_DATE_EPOCH)
    info.uname = info.gname = ""
    info.pax_headers = {}
    return info


def write_layer(out: Path, root: Path, paths: Iterable[str], owner: tuple[int, int] | None) -> None:
    """Archive `paths` (relative to `root`, recursively, sorted) reproducibly.

    `owner` forces every entry's uid:gid (for files built by an unprivileged
    user); None keeps the numeric owners on disk.
    """

    def entry(info: tarfile.TarInfo) -> tarfile.TarInfo:
        if owner is not None:
            info.uid, info.gid = owner
        return _normalise(info)

    with tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(paths):
            tar.add(root / path, arcname=path, recursive=True, filter=entry)


def _umoci(*args: str) -> None:
    subprocess.run(
        ["umoci", *args], check=True, timeout=UMOCI_TIMEOUT_SECONDS, stdout=subprocess.DEVNULL
    )


def _config_flags(config: ImageConfig) -> list[str]:
    flags = ["--config.user", config.user]
    flags += [f"--config.entrypoint={word}" for word in config.entrypoint]
    flags += [f"--config.cmd={word}" for word in config.cmd]
    if config.workdir:
        flags += ["--config.workingdir", config.workdir]
    flags += [f"--config.env={key}={value}" for key, value in config.env.items()]
    flags += [f"--config.exposedports={port}" for port in config.exposed_ports]
    flags += [f"--config.label={key}={value}" for key, value in config.labels.items()]
    return flags


def assemble(layout: Path, layers: Iterable[Layer], config: ImageConfig, architecture: str) -> None:
    """Write a one-manifest OCI layout at `layout` (tagged INTERNAL_TAG)."""
    image = f"{layout}:{INTERNAL_TAG}"
    _umoci("init", "--layout", str(layout))
    _umoci("new", "--image", image)
    for layer in layers:
        _umoci(
            "raw",
            "add-layer",
            "--image",
            image,
            "--history.created",
            CREATED,
            "--history.created_by",
            layer.created_by,
            str(layer.archive),
        )
    _umoci(
        "config",
        "--image",
        image,
        "--no-history",
        "--created",
        CREATED,
        "--os",
        "linux",
        "--architecture",
        architecture,
        *_config_flags(config),
    )
    _umoci("gc", "--layout", str(layout))


def _name_index(layout: Path, names: Iterable[str]) -> None:
    """Replace the layout's index with one entry per full image name."""
    index = json.loads((layout / "index.json").read_text())
    built = [m for m in index["manifests"] if m["annotations"][REF_NAME] == INTERNAL_TAG]
    (manifest,) = built
    entries = []
    for name in names:
        descriptor = {k: v for k, v in manifest.items() if k != "annotations"}
        descriptor["annotations"] = {CONTAINERD_NAME: name, REF_NAME: name.rpartition(":")[2]}
        entries.append(descriptor)
    index["manifests"] = entries
    (layout / "index.json").write_text(json.dumps(index, indent=2, sort_keys=True) + "\n")


def pack(layout: Path, names: Iterable[str], out: Path) -> None:
    """Name the layout's image and archive the layout as `out` (atomically)."""
    _name_index(layout, names)
    partial = out.with_name(out.name + ".partial")
    write_layer(partial, layout, sorted(os.listdir(layout)), owner=(0, 0))
    partial.replace(out)


@dataclass(frozen=True)
class Image:
    """What an image tarball holds, read back without unpacking it."""

    names: tuple[str, ...]
    manifest: dict[str, Any]
    config: dict[str, Any]
    layer_digests: tuple[str, ...]


def _blob(tar: tarfile.TarFile, digest: str) -> IO[bytes]:
    algorithm, _, hexdigest = digest.partition(":")
    member = tar.extractfile(f"blobs/{algorithm}/{hexdigest}")
    if member is None:
        raise ValueError(f"the image archive lacks blob {digest}")
    return member


def read_image(tarball: Path) -> Image:
    with tarfile.open(tarball) as tar:
        index_file = tar.extractfile("index.json")
        if index_file is None:
            raise ValueError(f"{tarball} is not an OCI image layout (no index.json)")
        index = json.load(index_file)
        digests = {m["digest"] for m in index["manifests"]}
        if len(digests) != 1:
            raise ValueError(f"{tarball} holds {len(digests)} images, expected one")
        manifest = json.load(_blob(tar, digests.pop()))
        config = json.load(_blob(tar, manifest["config"]["digest"]))
    names = tuple(m["annotations"][CONTAINERD_NAME] for m in index["manifests"])
    layers = tuple(layer["digest"] for layer in manifest["layers"])
    return Image(names=names, manifest=manifest, config=config, layer_digests=layers)


def extract(tarball: Path, path: str, dest: Path) -> None:
    """Copy one file of the image's layers (the last layer holding it wins) to `dest`."""
    found = None
    with tarfile.open(tarball) as tar:
        for digest in read_image(tarball).layer_digests:
            with tarfile.open(fileobj=_blob(tar, digest), mode="r:*") as layer:
                member = next((m for m in layer if m.name.removeprefix("./") == path), None)
                source = layer.extractfile(member) if member is not None else None
                if source is not None:
                    found = source.read()
    if found is None:
        raise ValueError(f"{tarball} holds no file {path}")
    dest.write_bytes(found)


def unpacked_size(tarball: Path) -> int:
    """Bytes of the files in every layer: what the image occupies once unpacked."""
    total = 0
    with tarfile.open(tarball) as tar:
        for digest in read_image(tarball).layer_digests:
            with tarfile.open(fileobj=_blob(tar, digest), mode="r:*") as layer:
                total += sum(member.size for member in layer if member.isfile())
    return total


def unpack(tarball: Path, bundle: Path) -> None:
    """An OCI runtime bundle (rootfs and config.json from the image config), via umoci."""
    with tempfile.TemporaryDirectory() as scratch:
        layout = Path(scratch) / "layout"
        with tarfile.open(tarball) as tar:
            tar.extractall(layout, filter="tar")
        tag = read_image(tarball).names[0].rpartition(":")[2]
        _umoci("unpack", "--image", f"{layout}:{tag}", str(bundle))
