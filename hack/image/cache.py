"""Where built images live, keyed by the hash of everything that went in."""

import fcntl
import hashlib
import os
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

# Files a build never reads, however they got into a source directory.
IGNORED_PARTS = ("__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache")
IGNORED_SUFFIXES = (".pyc", ".pyo")
# An image archive nobody asked for in this long is deleted by the next build of that image.
UNUSED_DAYS = 7


def cache_dir() -> Path:
    configured = os.environ.get("TRUSSIUM_IMAGE_CACHE")
    if configured:
        return Path(configured)
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "trussium-operator" / "images"


def source_files(root: Path, paths: Iterable[str]) -> list[Path]:
    """The files under `paths` (files or directories, relative to `root`), sorted."""
    found: list[Path] = []
    for path in paths:
        target = root / path
        candidates = [target] if target.is_file() else target.rglob("*")
        for candidate in candidates:
            relative = candidate.relative_to(root)
            if (
                candidate.is_file()
                and not set(relative.parts) & set(IGNORED_PARTS)
                and candidate.suffix not in IGNORED_SUFFIXES
            ):
                found.append(candidate)
    return sorted(found)


class Key:
    """A content hash: feed it names, strings and files in a fixed order."""

    def __init__(self) -> None:
        self._hash = hashlib.sha256()

    def text(self, label: str, value: str) -> "Key":
        data = value.encode()
        self._hash.update(b"%s:%d:%b;" % (label.encode(), len(data), data))
        return self

    def files(self, root: Path, files: Iterable[Path]) -> "Key":
        for file in files:
            self.text(str(file.relative_to(root)), hashlib.sha256(file.read_bytes()).hexdigest())
            self.text("mode", oct(file.stat().st_mode & 0o111))
        return self

    def hexdigest(self) -> str:
        return self._hash.hexdigest()[:16]


@contextmanager
def locked(name: str) -> Iterator[None]:
    """One build of `name` at a time on this machine; others wait for it."""
    directory = cache_dir()
    directory.mkdir(parents=True, exist_ok=True)
    with (directory / f".{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def used(path: Path) -> Path:
    """Mark a cached archive as just used (its mtime), so pruning keeps it."""
    path.touch()
    return path


def prune(image: str, keep: Path) -> None:
    """Delete the archives of `image` that no build has returned for UNUSED_DAYS.

    Several work trees share the cache, each with its own sources and so its
    own archive; age, not "older than mine", decides.
    """
    cutoff = time.time() - UNUSED_DAYS * 86400
    for archive in cache_dir().glob(f"{image}-*.tar"):
        if archive != keep and archive.stat().st_mtime < cutoff:
            archive.unlink(missing_ok=True)
