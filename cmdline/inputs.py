"""The manifest reader of `trussium-webhook validate` and `trussium-controller render`.

Files, folders (searched recursively for manifests) and `-` for standard
input, parsed by `common.manifests`. What cannot be read or parsed is
reported, never raised, so one bad file does not hide the verdict on the
others.
"""

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from common.manifests import ManifestError, parse_manifests

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")
STDIN = "-"
STDIN_LABEL = "<stdin>"


@dataclass(frozen=True)
class Unreadable:
    """An input that could not be read or parsed: the command exits 2."""

    file: str
    reason: str

    def __str__(self) -> str:
        return f"{self.file}: {self.reason}"


@dataclass
class Inputs:
    documents: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    files: int = 0
    problems: list[Unreadable] = field(default_factory=list)


def read_manifests(paths: Sequence[str], stdin: TextIO) -> Inputs:
    """Every object in `paths`, as (file label, object), in the order given."""
    inputs = Inputs()
    for label, path in _files(paths, inputs.problems):
        try:
            text = stdin.read() if path is None else path.read_text(encoding="utf-8")
            documents = parse_manifests(text, label)
        except (OSError, UnicodeDecodeError) as error:
            reason = error.strerror if isinstance(error, OSError) else "not UTF-8 text"
            inputs.problems.append(Unreadable(label, f"cannot read: {reason}"))
            continue
        except ManifestError as error:
            inputs.problems.append(Unreadable(label, str(error).removeprefix(f"{label}: ")))
            continue
        inputs.files += 1
        inputs.documents += [(label, document) for document in documents]
    return inputs


def _files(paths: Sequence[str], problems: list[Unreadable]) -> Iterator[tuple[str, Path | None]]:
    """(label, path) per input file; a folder yields its manifests, `-` is stdin (None)."""
    for given in paths:
        if given == STDIN:
            yield STDIN_LABEL, None
            continue
        path = Path(given)
        if path.is_dir():
            yield from (
                (str(found), found)
                for found in sorted(path.rglob("*"))
                if found.suffix in MANIFEST_SUFFIXES and found.is_file()
            )
        elif path.exists():
            yield given, path
        else:
            problems.append(Unreadable(given, "no such file or folder"))
