"""The operator image's base: a minimal Debian root filesystem with Python.

It plays the part of the Dockerfile's `python:3.11-slim`: Debian bookworm's
python3 is 3.11, the same minor version, on the same C library. mmdebstrap
builds it from Debian packages (no image is pulled), reproducibly for a given
mirror state (SOURCE_DATE_EPOCH), without documentation, manuals, locales or
apt's package lists, and without apt itself (variant `essential`).
"""

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from hack.image.cache import cache_dir, locked
from hack.image.oci import SOURCE_DATE_EPOCH

SUITE = "bookworm"
MIRRORS = (
    "deb http://deb.debian.org/debian bookworm main",
    "deb http://deb.debian.org/debian bookworm-updates main",
    "deb http://deb.debian.org/debian-security bookworm-security main",
)
# python:3.11-slim also ships CA certificates, netbase and tzdata.
PACKAGES = ("python3", "ca-certificates", "netbase", "tzdata")
# Licences stay (usr/share/doc/*/copyright); nothing else a program reads is dropped.
DPKG_OPTIONS = (
    "path-exclude=/usr/share/doc/*",
    "path-include=/usr/share/doc/*/copyright",
    "path-exclude=/usr/share/man/*",
    "path-exclude=/usr/share/info/*",
    "path-exclude=/usr/share/locale/*",
    "path-exclude=/usr/share/lintian/*",
)
# Logs and backups of the install itself.
CLEANUP = (
    'rm -rf "$1"/var/log/* "$1"/var/cache/debconf/*-old "$1"/var/lib/dpkg/*-old'
    ' "$1"/var/cache/ldconfig/aux-cache'
)
MERGED_USR_HOOKS = "/usr/share/mmdebstrap/hooks/merged-usr"
# Bumped when the recipe changes in a way its arguments do not show.
REVISION = "1"
BUILD_TIMEOUT_SECONDS = 1800


def mmdebstrap_arguments() -> list[str]:
    """mmdebstrap's arguments, except the output path that follows the suite."""
    return [
        "--mode=root",
        "--variant=essential",
        "--format=tar",
        "--skip=output/dev",
        # The merged-/usr layout without the usrmerge package (which pulls in perl).
        f"--hook-dir={MERGED_USR_HOOKS}",
        f"--include={','.join(PACKAGES)}",
        *(f"--dpkgopt={option}" for option in DPKG_OPTIONS),
        f"--customize-hook={CLEANUP}",
        SUITE,
    ]


def base_key() -> str:
    recipe = json.dumps([REVISION, mmdebstrap_arguments(), MIRRORS])
    return hashlib.sha256(recipe.encode()).hexdigest()[:16]


def base_archive() -> Path:
    """The base layer archive, built once per recipe (it needs root)."""
    out = cache_dir() / f"debian-{SUITE}-{base_key()}.tar"
    if out.exists():
        return out
    with locked("debian"):
        if out.exists():
            return out
        if shutil.which("mmdebstrap") is None:
            raise RuntimeError("mmdebstrap is missing: run hack/image/setup.sh (as root)")
        if os.geteuid() != 0:
            raise RuntimeError("building the Debian base needs root (mmdebstrap --mode=root)")
        with tempfile.TemporaryDirectory(dir=out.parent) as work:
            partial = Path(work) / out.name
            env = {**os.environ, "SOURCE_DATE_EPOCH": str(SOURCE_DATE_EPOCH)}
            subprocess.run(
                ["mmdebstrap", "--quiet", *mmdebstrap_arguments(), str(partial), *MIRRORS],
                check=True,
                env=env,
                timeout=BUILD_TIMEOUT_SECONDS,
            )
            partial.replace(out)
    return out
