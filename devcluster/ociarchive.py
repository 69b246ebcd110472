"""A single-layer OCI image archive (an OCI image layout in a tar), the format
`ctr images import` reads: enough for images made of a few static files, such
as the node's sandbox ("pause") image, without any image tool."""

import hashlib
import io
import json
import tarfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

LAYER_TYPE = "application/vnd.oci.image.layer.v1.tar"
CONFIG_TYPE = "application/vnd.oci.image.config.v1+json"
MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"
INDEX_TYPE = "application/vnd.oci.image.index.v1+json"


def _tar(members: Mapping[str, tuple[bytes, int]]) -> bytes:
    """A reproducible tar: fixed owner and times, members in name order."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for name in sorted(members):
            data, mode = members[name]
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), mode, 0
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _blob(blobs: dict[str, bytes], media_type: str, data: bytes) -> dict[str, Any]:
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    blobs[f"blobs/sha256/{digest.removeprefix('sha256:')}"] = data
    return {"mediaType": media_type, "digest": digest, "size": len(data)}


def _json(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


def write_image(
    path: Path,
    name: str,
    *,
    files: Mapping[str, tuple[bytes, int]],
    entrypoint: Sequence[str],
    user: str,
) -> str:
    """Write the archive of a linux/amd64 image named `name` (registry/repo:tag)
    holding `files` (path in the image -> (content, mode)); returns the manifest digest."""
    blobs: dict[str, bytes] = {}
    layer = _tar(files)
    layer_descriptor = _blob(blobs, LAYER_TYPE, layer)
    config = {
        "architecture": "amd64",
        "os": "linux",
        "config": {"Entrypoint": list(entrypoint), "User": user},
        "rootfs": {"type": "layers", "diff_ids": [layer_descriptor["digest"]]},
    }
    manifest = {
        "schemaVersion": 2,
        "mediaType": MANIFEST_TYPE,
        "config": _blob(blobs, CONFIG_TYPE, _json(config)),
        "layers": [layer_descriptor],
    }
    manifest_descriptor = _blob(blobs, MANIFEST_TYPE, _json(manifest))
    tag = name.rsplit(":", 1)[1] if ":" in name.rsplit("/", 1)[-1] else "latest"
    index = {
        "schemaVersion": 2,
        "mediaType": INDEX_TYPE,
        "manifests": [
            {
                **manifest_descriptor,
                "platform": {"architecture": "amd64", "os": "linux"},
                "annotations": {
                    "io.containerd.image.name": name,
                    "org.opencontainers.image.ref.name": tag,
                },
            }
        ],
    }
    layout = {
        "oci-layout": _json({"imageLayoutVersion": "1.0.0"}),
        "index.json": _json(index),
        **blobs,
    }
    path.write_bytes(_tar({member: (data, 0o644) for member, data in layout.items()}))
    return str(manifest_descriptor["digest"])
