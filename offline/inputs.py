"""The manifest reader of `trussium-webhook validate` and `trussium-controller render`.

Files, folders (searched recursively for manifests, version-control and
`node_modules` folders left out) and `-` for standard input, parsed by
`offline.manifests`. What cannot be read or parsed is reported, never
raised, so one bad file does not hide the verdict on the others; a Helm
template or a file with custom tags is set aside as skipped, since it is
not meant for kubectl as it stands. In a kustomize tree, the kustomization
and its JSON 6902 patches are skipped too, and its strategic-merge patches
are marked as such (`offline.kustomize`): the kustomization in the file's
folder or any folder above it says which. An input larger than the cap
(`MAX_FILE_MIB`, `--max-file-mib`) is refused unread: parsing costs memory
and time in proportion to the text.
"""

import functools
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, TextIO

from trussium_operator.offline.kustomize import (
    JSON6902_PATCH,
    KUSTOMIZATION,
    KUSTOMIZATION_FILES,
    operations_list,
    patch_files,
)
from trussium_operator.offline.manifests import (
    Manifest,
    ManifestError,
    NotAManifestError,
    read_manifests_text,
)

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")
# Never manifests of the project: version control's own files and installed packages.
SKIPPED_FOLDERS = frozenset({".git", ".hg", ".svn", ".bzr", "_darcs", ".jj", "node_modules"})
STDIN = "-"
STDIN_LABEL = "<stdin>"
# Ten times the API server's 3 MiB limit on one request: room for a `kubectl get -A
# -o yaml` List of thousands of stored runtimes, which no request bounds.
MAX_FILE_MIB = 32

# The least read at once from a file whose size says nothing (a pipe, a device).
_PIECE_BYTES = 2**16

Input = tuple[str, Path | None]  # (label, path); None is standard input


@dataclass(frozen=True)
class Unreadable:
    """An input that could not be read or parsed (the command exits 2), or that was skipped;
    `line` and `column` where the parser stopped, when it says."""

    file: str
    reason: str
    line: int | None = None
    column: int | None = None

    def __str__(self) -> str:
        return f"{self.file}: {self.reason}"


@dataclass
class Inputs:
    """What was read: `files` counts every input looked at, readable or not.

    `kustomize` are the `skipped` inputs that are a kustomization or its JSON 6902
    patches (not templates: `--fail-on-skipped` does not fail them); `patches`
    labels the files that are strategic-merge patches.
    """

    manifests: list[tuple[str, Manifest]] = field(default_factory=list)
    files: int = 0
    problems: list[Unreadable] = field(default_factory=list)
    skipped: list[Unreadable] = field(default_factory=list)
    kustomize: list[Unreadable] = field(default_factory=list)
    patches: set[str] = field(default_factory=set)

    @property
    def documents(self) -> list[tuple[str, dict[str, Any]]]:
        return [(label, manifest.object) for label, manifest in self.manifests]

    def extend(self, other: "Inputs") -> None:
        self.manifests += other.manifests
        self.files += other.files
        self.problems += other.problems
        self.skipped += other.skipped
        self.kustomize += other.kustomize
        self.patches |= other.patches


def read_manifests(
    paths: Sequence[str],
    stdin: TextIO,
    ignore: Sequence[re.Pattern[str]] = (),
    max_mib: int = MAX_FILE_MIB,
) -> Inputs:
    """Every object in `paths`, as (file label, manifest), in the order given."""
    files, missing = find_inputs(paths, ignore)
    inputs = Inputs(files=len(missing), problems=missing)
    inputs.extend(read_inputs(files, stdin, max_mib))
    return inputs


def find_inputs(
    paths: Sequence[str], ignore: Sequence[re.Pattern[str]] = ()
) -> tuple[list[Input], list[Unreadable]]:
    """The inputs `paths` name, folders searched, and the paths that do not exist.

    A file whose path matches any `ignore` pattern (searched, as kubeconform's
    `-ignore-filename-pattern`) is left out, whether found in a folder or named.
    """
    found: list[Input] = []
    missing: list[Unreadable] = []
    for given in paths:
        if given == STDIN:
            found.append((STDIN_LABEL, None))
            continue
        path = Path(given)
        if path.is_dir():
            found += [(str(p), p) for p in _manifests_under(path)]
        elif path.exists():
            found.append((given, path))
        else:
            missing.append(Unreadable(given, "no such file or folder"))
    return [(label, path) for label, path in found if not _ignored(label, ignore)], missing


def _ignored(label: str, ignore: Sequence[re.Pattern[str]]) -> bool:
    return label != STDIN_LABEL and any(pattern.search(label) for pattern in ignore)


def _manifests_under(folder: Path) -> list[Path]:
    found: list[Path] = []
    for root, folders, names in os.walk(folder):
        folders[:] = [name for name in folders if name not in SKIPPED_FOLDERS]
        found += [Path(root, name) for name in names if name.endswith(MANIFEST_SUFFIXES)]
    return sorted(path for path in found if path.is_file())


class TooLargeError(Exception):
    """An input over the size cap, left unparsed."""


def read_inputs(files: Sequence[Input], stdin: TextIO, max_mib: int = MAX_FILE_MIB) -> Inputs:
    """Read and parse each input; problems and skipped inputs are reported in `Inputs`."""
    inputs = Inputs(files=len(files))
    for label, path in files:
        role = _kustomize_role(path) if path is not None else None
        if role in (KUSTOMIZATION, JSON6902_PATCH):
            inputs.kustomize.append(Unreadable(label, f"skipped: {role}"))
            inputs.skipped.append(inputs.kustomize[-1])
            continue
        text = ""
        try:
            text = _read_capped(stdin, path, max_mib * 2**20)
            manifests = read_manifests_text(text, label)
        except (OSError, UnicodeDecodeError) as error:
            reason = error.strerror if isinstance(error, OSError) else "not UTF-8 text"
            inputs.problems.append(Unreadable(label, f"cannot read: {reason}"))
            continue
        except TooLargeError:
            reason = f"larger than {max_mib} MiB, the limit per file (--max-file-mib)"
            inputs.problems.append(Unreadable(label, reason))
            continue
        except NotAManifestError as error:
            inputs.skipped.append(Unreadable(label, f"skipped: {error}", error.line, error.column))
            continue
        except ManifestError as error:
            if role == _PATCH and operations_list(text):  # `patches` take JSON 6902 too
                inputs.kustomize.append(Unreadable(label, f"skipped: {JSON6902_PATCH}"))
                inputs.skipped.append(inputs.kustomize[-1])
                continue
            reason = str(error).removeprefix(f"{label}: ")
            inputs.problems.append(Unreadable(label, reason, error.line, error.column))
            continue
        inputs.manifests += [(label, manifest) for manifest in manifests]
        if role == _PATCH:
            inputs.patches.add(label)
    return inputs


_PATCH = "patch"
_NO_PATCHES: tuple[frozenset[Path], frozenset[Path]] = (frozenset(), frozenset())


def _kustomize_role(path: Path) -> str | None:
    """KUSTOMIZATION, JSON6902_PATCH, _PATCH (strategic-merge, or either under `patches`)
    or None, from the kustomizations of the file's folder and the folders above it."""
    if path.name in KUSTOMIZATION_FILES:
        return KUSTOMIZATION
    if path.is_symlink():
        resolved = path.resolve()
        patches = _patches_above(resolved.parent)
    else:  # the folder's resolution and kustomizations are shared by the files in it
        folder, patches = _folder_patches(path.parent)
        if not patches:
            return None
        resolved = folder / path.name
    for either, json6902 in patches:
        if resolved in json6902:
            return JSON6902_PATCH
        if resolved in either:
            return _PATCH
    return None


@functools.lru_cache(maxsize=4096)
def _folder_patches(
    folder: Path,
) -> tuple[Path, tuple[tuple[frozenset[Path], frozenset[Path]], ...]]:
    """`folder` resolved, and the patches named in it and the folders above it."""
    resolved = folder.resolve()
    return resolved, _patches_above(resolved)


def _patches_above(
    resolved: Path,
) -> tuple[tuple[frozenset[Path], frozenset[Path]], ...]:
    """The patch files named by the kustomizations of `resolved` and the folders above it,
    nearest first, leaving out the folders that name none."""
    found = (_patches_of(folder) for folder in (resolved, *resolved.parents))
    return tuple(patches for patches in found if patches != _NO_PATCHES)


@functools.lru_cache(maxsize=4096)
def _patches_of(folder: Path) -> tuple[frozenset[Path], frozenset[Path]]:
    """The patch files the kustomization in `folder` names, resolved; none if it has no
    readable one (a broken kustomization is kustomize's to report)."""
    for name in KUSTOMIZATION_FILES:
        file = folder / name
        if not file.is_file():
            continue
        try:
            found = read_manifests_text(_read_capped(None, file, MAX_FILE_MIB * 2**20), name)
        except (OSError, UnicodeDecodeError, TooLargeError, ManifestError):
            return _NO_PATCHES
        either, json6902 = patch_files(found[0].object) if found else ([], [])
        return (
            frozenset((folder / p).resolve() for p in either),
            frozenset((folder / p).resolve() for p in json6902),
        )
    return _NO_PATCHES


def _read_capped(stdin: TextIO | None, path: Path | None, limit: int) -> str:
    """The text of `path` (None: `stdin`), read no further than `limit` bytes past which
    TooLargeError is raised. Standard input is read in characters, each at least a byte,
    and then measured in UTF-8."""
    if path is None:
        assert stdin is not None
        text = stdin.read(limit + 1)
        if len(text) > limit or len(text.encode("utf-8", "surrogatepass")) > limit:
            raise TooLargeError
        return text
    with path.open("rb") as file:
        data = _head(file, limit + 1)
    if len(data) > limit:
        raise TooLargeError
    return data.decode("utf-8")


def _head(file: BinaryIO, count: int) -> bytearray:
    """The first `count` bytes of `file`, or all of it if shorter, read in pieces the size
    the file says it is: one read of `count` bytes would allocate that much for every file."""
    piece = max(os.fstat(file.fileno()).st_size + 1, _PIECE_BYTES)
    data = bytearray()
    while len(data) < count and (chunk := file.read(min(piece, count - len(data)))):
        data += chunk
    return data
