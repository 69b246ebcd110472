"""Kubernetes manifests from text, read exactly as the API server reads YAML.

Text in, JSON-compatible dicts out (no file I/O), for both command-line
tools. The API server turns YAML into JSON with sigs.k8s.io/yaml: its
go-yaml v2 fork resolves plain scalars with YAML 1.1-flavoured rules
(`yes`, `on` and `y` are booleans, `0o17` and `017` octal, `1e3` a number,
timestamps stay strings, no sexagesimal numbers), non-string keys become
strings, and the JSON decoder then keeps integers that fit in 64 bits and
turns every other number into a float. This module applies the same rules,
in the same order, on libyaml's events (PyYAML's C binding), refuses what
that reading refuses (NaN and infinities, null keys, excessive aliasing),
and keeps the later value of a key set twice (a `<<` merge included), as
kubectl does, listing each such key: go-yaml's strict reading refuses
them. `tests/apiserver/test_yaml_differential.py` holds our reading to the
API server's on a generated corpus. `kind: List` documents are expanded
into their items.

Each object comes with the line and column of every field, for reports
that point into the file.
"""

import base64
import math
import re
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal
from typing import Any

import yaml
from yaml import events

try:  # libyaml: the same events as PyYAML's pure-Python parser, ten times faster
    from yaml.cyaml import CParser as _Parser  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - PyYAML built without libyaml
    from yaml.loader import BaseLoader as _Parser  # type: ignore[assignment]

Path = tuple[str | int, ...]
# 1-based (line, column) of each field's key, or of each list item, by path.
Positions = dict[Path, tuple[int, int]]

_TAG = "tag:yaml.org,2002:"
# Tags go-yaml reads (collection tags are ignored, as there); `!` is the non-specific tag.
_STR, _BINARY, _MERGE, _TIMESTAMP = (_TAG + n for n in ("str", "binary", "merge", "timestamp"))
_RESOLVABLE = {_TAG + n for n in ("str", "bool", "int", "float", "null", "timestamp")}
_KNOWN_TAGS = (
    _RESOLVABLE
    | {"!", _BINARY, _MERGE}
    | {_TAG + n for n in ("map", "seq", "omap", "set", "pairs")}
)
_INT64 = 2**63
# go-yaml's resolve table: the first character says what a plain scalar may be.
_HINT = dict.fromkeys("+-", "S") | dict.fromkeys("0123456789", "D")
_HINT |= dict.fromkeys("yYnNtTfFoO~", "M") | {".": "."}
_NAN, _INF = math.nan, math.inf
_WORDS: dict[str, tuple[str, Any]] = {
    **dict.fromkeys(("y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE"), ("bool", True)),
    **dict.fromkeys(("on", "On", "ON"), ("bool", True)),
    **dict.fromkeys(("n", "N", "no", "No", "NO", "false", "False", "FALSE"), ("bool", False)),
    **dict.fromkeys(("off", "Off", "OFF"), ("bool", False)),
    **{w: ("null", None) for w in ("", "~", "null", "Null", "NULL")},
    **{w: ("float", _NAN) for w in (".nan", ".NaN", ".NAN")},
    **{w: ("float", _INF) for w in (".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF")},
    **{w: ("float", -_INF) for w in ("-.inf", "-.Inf", "-.INF")},
    "<<": ("merge", "<<"),
}
# Go's strconv.ParseInt/ParseUint with base 0, after go-yaml removed underscores.
_GO_INT = re.compile(
    r"([+-]?)(?:0[xX]([0-9a-fA-F]+)|0[bB]([01]+)|0[oO]([0-7]+)|0([0-7]*)|([1-9][0-9]*))"
)
_YAML_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")
# Go's ParseFloat on ".5e3": underscores only between digits, as Python's float() takes them.
_DOT_FLOAT = re.compile(r"\.[0-9_]+([eE][-+]?[0-9_]+)?")
_BINARY_DIGITS = re.compile(r"[+-]?[01]+")
_TIMESTAMP_FORMS = re.compile(
    r"(\d{4})-(\d\d?)-(\d\d?)"
    r"(?:(?:[Tt](\d\d?):(\d\d?):(\d\d?)(?:\.\d+)?(?:Z|[+-]\d\d:\d\d))"
    r"|(?: (\d\d?):(\d\d?):(\d\d?)(?:\.\d+)?))?",
    re.ASCII,  # Go's digits are ASCII
)
# go-yaml's limit on alias expansion ("document contains excessive aliasing").
_ALIAS_RATIO_LOW, _ALIAS_RATIO_HIGH = 400_000, 4_000_000
# Nesting refused past this depth: far beyond any Kubernetes object, and well inside
# Python's recursion limit (go-yaml's own limit is 10,000).
MAX_DEPTH = 200


class ManifestError(ValueError):
    """Text that is not a stream of Kubernetes objects; the message says where and why."""

    def __init__(self, message: str, line: int | None = None, column: int | None = None):
        super().__init__(message)
        self.line, self.column = line, column


class NotAManifestError(ManifestError):
    """Text meant for another tool (a Helm template, custom tags): skipped, not invalid."""


@dataclass(frozen=True)
class Manifest:
    """One object and where each of its fields is in the text."""

    object: dict[str, Any]
    positions: Positions = field(default_factory=dict)
    # Keys set more than once in one mapping: (path, (line, column)) of each later setting.
    duplicates: list[tuple[Path, tuple[int, int]]] = field(default_factory=list)

    def position(self, field_path: str) -> tuple[int, int] | None:
        """(line, column) of `field_path` (`spec.a[0].b`, `metadata.labels[k]`), or of the
        nearest of its parents that the text has (a missing field points at its parent)."""
        path = split_field_path(field_path)
        while path:
            if (found := self.positions.get(path)) is not None:
                return found
            path = path[:-1]
        return None


def field_path(path: Path) -> str:
    """("spec", "tolerations", 0) → `spec.tolerations[0]`; a key with `.` or `/` in brackets."""
    text = ""
    for part in path:
        if isinstance(part, int) or "." in part or "/" in part:
            text += f"[{part}]"
        else:
            text += f".{part}" if text else part
    return text


def split_field_path(field_path: str) -> Path:
    """`spec.tolerations[0].key` → ("spec", "tolerations", 0, "key"); `labels[a.b/c]` keeps
    the bracketed key whole."""
    parts: list[str | int] = []
    for match in re.finditer(r"([^.\[\]]+)|\[([^\]]*)\]", field_path):
        name, bracketed = match.groups()
        if name is not None:
            parts.append(name)
        else:
            index = bracketed.isascii() and bracketed.isdigit()
            parts.append(int(bracketed) if index else bracketed)
    return tuple(parts)


class _DecodeError(Exception):
    def __init__(self, message: str, mark: Any = None):
        super().__init__(message)
        self.mark = mark


def _go_int(text: str) -> int | None:
    """strconv.ParseInt(text, 0, 64), else ParseUint: None if neither parses."""
    match = _GO_INT.fullmatch(text)
    if match is None:
        return None
    sign, hexa, binary, octal, legacy_octal, decimal = match.groups()
    if hexa is not None:
        value = int(hexa, 16)
    elif binary is not None:
        value = int(binary, 2)
    elif octal is not None:
        value = int(octal, 8)
    elif legacy_octal is not None:
        value = int(legacy_octal or "0", 8)
    else:
        value = int(decimal)
    if sign == "-":
        value = -value
    if -_INT64 <= value < _INT64 or (sign == "" and value < 2 * _INT64):
        return value
    return None


def _go_float(text: str) -> float | None:
    """strconv.ParseFloat on a decimal form: None on a misplaced underscore or on
    overflow (Go's ErrRange)."""
    try:
        value = float(text)
    except ValueError:
        return None
    return None if math.isinf(value) else value


def _resolve(value: str, tag: str | None) -> tuple[str, Any]:
    """go-yaml v2's `resolve`: (kind, Go value) of a plain or tagged scalar."""
    hint = _HINT.get(value[:1], "N" if value == "" else None)
    if hint is None or tag == _STR:
        return "str", value
    if (word := _WORDS.get(value)) is not None:
        return word
    if hint == ".":
        if _DOT_FLOAT.fullmatch(value) and (number := _go_float(value)) is not None:
            return "float", number
    elif hint in "DS":
        if tag in (None, _TIMESTAMP) and _is_timestamp(value):
            return "timestamp", value
        plain = value.replace("_", "")
        if (integer := _go_int(plain)) is not None:
            return "int", integer
        if _YAML_FLOAT.fullmatch(plain) and (number := _go_float(plain)) is not None:
            return "float", number
        if plain.startswith("0b") and _BINARY_DIGITS.fullmatch(plain[2:]):
            integer = int(plain[2:], 2)
            if -_INT64 <= integer < 2 * _INT64 and (integer < _INT64 or plain[2] != "+"):
                return "int", integer
        elif plain.startswith("-0b") and _BINARY_DIGITS.fullmatch(plain[3:]):
            integer = int("-" + plain[3:], 2)
            if -_INT64 <= integer < _INT64:
                return "int", integer
    return "str", value


def _is_timestamp(value: str) -> bool:
    """go-yaml's parseTimestamp: a date, optionally with a time, that time.Parse accepts."""
    match = _TIMESTAMP_FORMS.fullmatch(value)
    if match is None:
        return False
    year, month, day, *clock = match.groups()
    try:
        date(int(year), int(month), int(day))
    except ValueError:
        return False
    hour, minute, second = [int(c) for c in clock if c is not None][:3] or [0, 0, 0]
    return hour < 24 and minute < 60 and second < 60


def _custom_tag(event: Any) -> NotAManifestError:
    line, column = event.start_mark.line + 1, event.start_mark.column + 1
    return NotAManifestError(
        f"custom tag {event.tag} at line {line}: not a Kubernetes manifest "
        "(the API server would ignore the tag)",
        line,
        column,
    )


def _scalar(event: Any) -> tuple[str, Any]:
    """(kind, Go value) of a scalar event, as go-yaml's decoder reads it."""
    tag, value = event.tag, event.value
    if tag is None:
        return _resolve(value, None) if event.implicit[0] else ("str", value)
    if tag not in _KNOWN_TAGS:
        raise _custom_tag(event)
    if tag == _BINARY:
        try:
            data = base64.b64decode(value.replace("\n", "").replace("\r", ""), validate=True)
        except ValueError:
            raise _DecodeError(
                "!!binary value contains invalid base64 data", event.start_mark
            ) from None
        return "str", data.decode("utf-8", errors="replace")
    if tag not in _RESOLVABLE:
        return "str", value
    kind, resolved = _resolve(value, tag)
    wanted = tag.removeprefix(_TAG)
    if kind == wanted or wanted == "str":
        return kind, resolved
    if wanted == "float" and kind == "int" and resolved < _INT64:
        return "float", float(resolved)
    raise _DecodeError(f"cannot decode !!{kind} `{value}` as a !!{wanted}", event.start_mark)


def _json_value(kind: str, value: Any, mark: Any) -> Any:
    """What the API server stores for a Go value: JSON, then int64 or float64."""
    if kind == "int":
        return value if value < _INT64 else float(value)
    if kind == "float":
        if math.isnan(value) or math.isinf(value):
            raise _DecodeError(f"json: unsupported value: {value}", mark)
        if value.is_integer() and abs(value) < 1e21:
            # Go writes an integral float as its shortest digits without an exponent.
            literal = int(value) if abs(value) < 2**53 else int(Decimal(repr(value)))
            return literal if -_INT64 <= literal < _INT64 else value
    return value


def _json_key(kind: str, value: Any, mark: Any) -> str:
    """sigs.k8s.io/yaml's string for a non-string map key."""
    if kind in ("str", "timestamp", "merge"):
        return str(value)
    if kind == "bool":
        return "true" if value else "false"
    if kind == "int" and value < _INT64:
        return str(value)
    if kind == "float":
        return _go_float32_g(value)
    type_name = "uint64" if kind == "int" else "<nil>"
    raise _DecodeError(f"unsupported map key of type: {type_name}", mark)


def _go_float32_g(value: float) -> str:
    """strconv.FormatFloat(value, 'g', -1, 32), with go-yaml's names for the specials."""
    if math.isnan(value):
        return ".nan"
    try:
        single = struct.unpack("f", struct.pack("f", value))[0]
    except OverflowError:
        single = math.copysign(math.inf, value)
    if math.isinf(single):
        return ".inf" if single > 0 else "-.inf"
    if single == 0:
        return "-0" if math.copysign(1, single) < 0 else "0"
    for precision in range(9):
        text = f"{single:.{precision}e}"
        if struct.unpack("f", struct.pack("f", float(text)))[0] == single:
            break
    mantissa, exponent_text = text.split("e")
    sign = "-" if mantissa.startswith("-") else ""
    digits = mantissa.lstrip("-").replace(".", "").rstrip("0") or "0"
    exponent = int(exponent_text)
    if exponent < -4 or exponent >= 6:
        rest = f".{digits[1:]}" if len(digits) > 1 else ""
        return f"{sign}{digits[0]}{rest}e{'-' if exponent < 0 else '+'}{abs(exponent):02d}"
    point = exponent + 1
    if point <= 0:
        return f"{sign}0.{'0' * -point}{digits}"
    if point >= len(digits):
        return f"{sign}{digits}{'0' * (point - len(digits))}"
    return f"{sign}{digits[:point]}.{digits[point:]}"


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


class _Document:
    """One document's events to its value, as go-yaml's decoder walks the nodes."""

    def __init__(self, next_event: Callable[[], Any]):
        self.next_event = next_event
        self.anchors: dict[str, tuple[Any, int]] = {}
        self.building: set[str] = set()
        self.depth = 0
        self.decoded = 1  # go-yaml counts the document node
        self.aliased = 0
        self.positions: Positions = {}
        self.duplicates: list[tuple[Path, tuple[int, int]]] = []

    def _count(self, mark: Any) -> None:
        self.decoded += 1
        if self.aliased > 100 and self.decoded > 1000:
            low, high = _ALIAS_RATIO_LOW, _ALIAS_RATIO_HIGH
            if self.decoded <= low:
                allowed = 0.99
            elif self.decoded >= high:
                allowed = 0.10
            else:
                allowed = 0.99 - 0.89 * (self.decoded - low) / (high - low)
            if self.aliased / self.decoded > allowed:
                raise _DecodeError("document contains excessive aliasing", mark)

    def node(self, event: Any, path: Path) -> tuple[str, Any]:
        """(kind, value) of the node starting with `event`: kind is a scalar's, or map/seq."""
        self._count(event.start_mark)
        kind = type(event)
        if kind is events.ScalarEvent:
            resolved = _scalar(event)
        elif kind is events.AliasEvent:
            return self._alias(event)
        else:
            if event.tag is not None and event.tag not in _KNOWN_TAGS:
                raise _custom_tag(event)
            start = self.decoded - 1
            self.depth += 1
            if self.depth > MAX_DEPTH:
                raise _DecodeError(f"nested deeper than {MAX_DEPTH} levels", event.start_mark)
            if event.anchor is not None:
                self.building.add(event.anchor)
            if kind is events.MappingStartEvent:
                resolved = "map", self._mapping(path)
            else:
                resolved = "seq", self._sequence(path)
            self.depth -= 1
            if event.anchor is not None:
                self.building.discard(event.anchor)
                self.anchors[event.anchor] = (resolved, self.decoded - start)
            return resolved
        if event.anchor is not None:
            self.anchors[event.anchor] = (resolved, 1)
        return resolved

    def _alias(self, event: events.AliasEvent) -> tuple[str, Any]:
        name = event.anchor
        if name in self.building:
            raise _DecodeError(f"anchor '{name}' value contains itself", event.start_mark)
        if name not in self.anchors:
            raise _DecodeError(f"unknown anchor '{name}' referenced", event.start_mark)
        (kind, value), size = self.anchors[name]
        self.decoded += size
        self.aliased += size
        self.decoded -= 1  # _count below adds the last one and checks the ratio
        self._count(event.start_mark)
        return kind, _copy(value)

    def value(self, event: Any, path: Path) -> Any:
        # Most values are scalars without tag or anchor: read as `node` reads them, inline.
        if type(event) is events.ScalarEvent and event.tag is None and event.anchor is None:
            self._count(event.start_mark)
            if not event.implicit[0]:
                return event.value
            kind, value = _resolve(event.value, None)
        else:
            kind, value = self.node(event, path)
            if kind in ("map", "seq"):
                return value
        return value if kind == "str" else _json_value(kind, value, event.start_mark)

    def _sequence(self, path: Path) -> list[Any]:
        items: list[Any] = []
        positions = self.positions
        while type(event := self.next_event()) is not events.SequenceEndEvent:
            mark = event.start_mark
            positions[(*path, len(items))] = (mark.line + 1, mark.column + 1)
            items.append(self.value(event, (*path, len(items))))
        return items

    def _mapping(self, path: Path) -> dict[str, Any]:
        result: dict[str, Any] = {}
        typed: dict[str, tuple[str, Any] | None] = {}  # go-yaml's key before it became a string
        positions = self.positions
        while type(event := self.next_event()) is not events.MappingEndEvent:
            mark = event.start_mark
            if (
                type(event) is events.ScalarEvent
                and event.value == "<<"
                and (event.implicit[0] or event.tag == _MERGE)
            ):
                self._merge(result, typed, self.next_event(), path)
                continue
            # Most keys are scalars without tag or anchor: read as `node` reads them, inline.
            if type(event) is events.ScalarEvent and event.tag is None and event.anchor is None:
                self._count(mark)
                text = event.value
                kind, key_value = _resolve(text, None) if event.implicit[0] else ("str", text)
            else:
                kind, key_value = self.node(event, path)
                if kind in ("map", "seq"):
                    raise _DecodeError(f"invalid map key: {key_value!r}", mark)
            key = key_value if kind == "str" else _json_key(kind, key_value, mark)
            value = self.value(self.next_event(), (*path, key))
            at = (mark.line + 1, mark.column + 1)
            if key in result:
                if typed[key] not in (None, ("str" if kind == "timestamp" else kind, key_value)):
                    # Two keys to go-yaml, one to JSON: the API server keeps either value.
                    raise _DecodeError(f"keys {key!r} of different types meet as JSON", mark)
                self.duplicates.append(((*path, key), at))
            positions[(*path, key)] = at
            result[key] = value
            typed[key] = ("str" if kind in ("timestamp", "merge") else kind, key_value)
        return result

    def _merge(
        self,
        into: dict[str, Any],
        typed: dict[str, tuple[str, Any] | None],
        event: Any,
        path: Path,
    ) -> None:
        """`<<: map`, `<<: *alias` or `<<: [maps]`, where it stands: it overrides keys set
        before it, later keys override it, and of several maps the first wins (go-yaml v2)."""
        kind = type(event)
        if kind is events.SequenceStartEvent:
            self.decoded -= 1  # go-yaml merges the items without decoding the list itself
        at = (event.start_mark.line + 1, event.start_mark.column + 1)
        merged_kind, merged = self.node(event, (*path, "<<"))
        sources = merged if kind is events.SequenceStartEvent else [merged]
        if merged_kind not in ("map", "seq") or any(not isinstance(s, dict) for s in sources):
            raise _DecodeError(
                "map merge requires map or sequence of maps as the value", event.start_mark
            )
        for source in reversed(sources):
            for key, value in source.items():
                if key in into:
                    self.duplicates.append(((*path, key), at))
                into[key] = value
                typed[key] = None


def _objects(manifest: Manifest, where: str) -> list[Manifest]:
    document = manifest.object
    if not isinstance(document, dict):
        raise ManifestError(
            f"{where}: expected a Kubernetes object (a mapping), got {type(document).__name__}"
        )
    kind = document.get("kind")
    if isinstance(kind, str) and kind.endswith("List") and "items" in document:
        items = document["items"] or []
        if not isinstance(items, list):
            raise ManifestError(f"{where}: the items of a {kind} must be a list")
        found: list[Manifest] = []
        for i, item in enumerate(items):
            prefix = ("items", i)
            positions = {p[2:]: v for p, v in manifest.positions.items() if p[:2] == prefix}
            duplicates = [(p[2:], v) for p, v in manifest.duplicates if p[:2] == prefix]
            found += _objects(Manifest(item, positions, duplicates), f"{where}, item {i}")
        return found
    return [manifest]


def is_template(text: str) -> bool:
    """Whether a line of `text` holds `{{` and, after it, `}}` (a Go or Helm template).

    One pass over each line with `str.find`: a regular expression such as
    `{{.*}}` backtracks from every `{{` to the end of its line, quadratic in a
    long line of braces.
    """
    for line in text.split("\n"):
        start = line.find("{{")
        if start >= 0 and line.find("}}", start + 2) >= 0:
            return True
    return False


def read_manifests_text(text: str, source: str = "<input>") -> list[Manifest]:
    """The objects in `text`, in order, with their positions; empty documents are skipped.

    Raises NotAManifestError for a Helm template or custom tags, ManifestError (naming
    `source`, the document number and the line) for anything the API server refuses.
    """
    found: list[Manifest] = []
    parser = _Parser(text)
    index = 0
    try:
        parser.get_event()  # stream start
        while type(start := parser.get_event()) is events.DocumentStartEvent:
            index += 1
            document = _Document(parser.get_event)
            event = parser.get_event()
            if type(event) is events.DocumentEndEvent:
                continue
            value = document.value(event, ())
            parser.get_event()  # document end
            if value is not None:
                manifest = Manifest(value, document.positions, document.duplicates)
                found += _objects(manifest, f"{source}: document {index}")
        del start
    except (yaml.YAMLError, _DecodeError) as error:
        if is_template(text):
            raise NotAManifestError(
                "a template (it contains {{ ... }}): render it first, for example "
                "helm template ... | trussium-webhook validate -f -"
            ) from None
        mark = getattr(error, "problem_mark", None) or getattr(error, "mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(error, "problem", None) or str(error)
        raise ManifestError(
            f"{source}: invalid YAML or JSON{where}: {problem}",
            mark.line + 1 if mark else None,
            mark.column + 1 if mark else None,
        ) from None
    finally:
        if hasattr(parser, "dispose"):
            parser.dispose()
    return found


def parse_manifests(text: str, source: str = "<input>") -> list[dict[str, Any]]:
    """The objects in `text`, in order (see `read_manifests_text`)."""
    return [manifest.object for manifest in read_manifests_text(text, source)]
