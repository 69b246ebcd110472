"""Images are built (or found in the cache) on demand. On a host that cannot
build them (hack/image/setup.sh could not install its tools, or not root for
the operator image's chroot), their tests skip with the one-line reason."""

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from hack.image.images import STANDIN_BINARY, build
from hack.image.oci import extract


@pytest.fixture(autouse=True)
def image_tools() -> None:
    if shutil.which("umoci") is None:
        pytest.skip("umoci is missing: run hack/image/setup.sh as root")


@pytest.fixture(scope="session")
def operator_tarball() -> Path:
    if os.geteuid() != 0:
        pytest.skip("building the operator image needs root (mmdebstrap, chroot)")
    if shutil.which("mmdebstrap") is None:
        pytest.skip("mmdebstrap is missing: run hack/image/setup.sh as root")
    return build("operator")


@pytest.fixture(scope="module")
def standin() -> Iterator[Path]:
    """The stand-in binary, copied out of its image where any user can run it."""
    with tempfile.TemporaryDirectory() as scratch:
        directory = Path(scratch)
        directory.chmod(0o755)
        binary = directory / STANDIN_BINARY
        extract(build("standin"), STANDIN_BINARY, binary)
        binary.chmod(0o755)
        yield binary
