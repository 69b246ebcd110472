"""The stand-in Trussium runtime image on the node: built by `python -m hack.image`
(cached by its inputs), imported into the node's containerd, never pulled."""

import subprocess

from devcluster import ControlPlane
from devcluster.node import build_image

STANDIN_REPOSITORY = "ghcr.io/trussiumhq/trussium"
STANDIN_TAG = "0.9.0"
UPGRADE_TAG = "0.9.1"
MISSING_TAG = "0.9.404"  # never built, never imported


def import_standin(plane: ControlPlane) -> None:
    plane.node.import_image(build_image("standin"))


def pin_by_digest(plane: ControlPlane, name: str) -> str:
    """The image's digest, under which the node now also knows it (`repo@digest`,
    the name a pull by digest would have created): returns the digest."""
    pinned = digest(plane, name)
    by_digest = f"{name.rsplit(':', 1)[0]}@{pinned}"
    subprocess.run(plane.node.ctr("images", "tag", "--force", name, by_digest), check=True)
    return pinned


def digest(plane: ControlPlane, name: str) -> str:
    """The content digest containerd holds for an image name."""
    listing = subprocess.run(
        plane.node.ctr("images", "list", f"name=={name}"),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for line in listing.splitlines()[1:]:
        fields = line.split()
        if fields and fields[0] == name:
            return next(f for f in fields if f.startswith("sha256:"))
    raise AssertionError(f"{name} is not in the node's containerd:\n{listing}")
