"""What every decoded JSON document must satisfy before a rule walks it.

Copying, defaulting and diffing are recursive, so a document nested a
thousand levels deep would end in RecursionError; and Python's json accepts
a lone surrogate escape (`"\\ud800"`), a string no later step can encode as
UTF-8. Checked once, iteratively, right after decoding; the problem comes
with the path where it was found. Pure.
"""

from dataclasses import dataclass
from typing import Any

# Real objects stay far below this: a Deployment with affinity and managed
# fields is about 25 levels deep.
MAX_DEPTH = 100
SHOWN_CHARACTERS = 80
_UNENCODABLE = "not valid Unicode (a lone surrogate escape such as \\ud800)"


@dataclass(frozen=True)
class JsonProblem:
    path: str
    message: str


def shown(value: object) -> str:
    """A value for a message: its repr, cut to a readable length (inputs can be megabytes)."""
    if isinstance(value, dict | list):
        return f"{type(value).__name__} of {len(value)} entries"
    if isinstance(value, str) and len(value) > SHOWN_CHARACTERS:
        return repr(value[:SHOWN_CHARACTERS]) + "..."
    text = repr(value)
    return text if len(text) <= SHOWN_CHARACTERS else text[:SHOWN_CHARACTERS] + "..."


def cut(value: object) -> str:
    """`str(value)` cut to a readable length."""
    text = str(value)
    return text if len(text) <= SHOWN_CHARACTERS else text[:SHOWN_CHARACTERS] + "..."


def path_key(key: object) -> str:
    """A map key as it appears in a field path: `[key]`, cut like `shown`."""
    text = cut(key)
    if not text.isascii() or not text.isprintable():
        text = ascii(text)[1:-1]
    return f"[{text}]"


# A path as a linked list (parent, key), so walking builds no string per node.
_Parent = tuple[Any, object] | None


def _path(parent: _Parent, root: str) -> str:
    keys: list[object] = []
    while parent is not None:
        parent, key = parent
        keys.append(key)
    text = root
    for key in reversed(keys):
        if isinstance(key, int):
            text += f"[{key}]"
        elif isinstance(key, str) and key.isidentifier() and key.isascii():
            text += f".{key}" if text else key
        else:
            text += path_key(key)
    return text


def _encodable(text: str) -> bool:
    if text.isascii():  # O(1) in CPython
        return True
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def _unencodable(texts: list[str]) -> int | None:
    """Index of the first text that is not valid Unicode; one joined check first (fast)."""
    if _encodable("".join(texts)):
        return None
    return next(i for i, text in enumerate(texts) if not _encodable(text))


def _sound(document: object) -> bool:
    """Whether `document` is within MAX_DEPTH and all its text encodable: one pass, level by
    level, each level's keys and strings joined and checked at once (no paths kept)."""
    level = [document]
    for _ in range(MAX_DEPTH):
        dicts = [node for node in level if type(node) is dict]
        values = [value for node in dicts for value in node.values()]
        values += [value for node in level if type(node) is list for value in node]
        keys = [key for node in dicts for key in node if type(key) is str]
        texts = [value for value in values if type(value) is str]
        if not (_encodable("".join(keys)) and _encodable("".join(texts))):
            return False
        level = [value for value in values if type(value) is dict or type(value) is list]
        if not level:
            return True
    return False


def json_problem(document: object, root: str = "") -> JsonProblem | None:
    """The first place where `document` is nested too deep or holds an unencodable string.

    A sound document costs one quick pass (`_sound`); only a faulty one is
    walked again to find the place, each container's keys and strings checked
    in bulk, so either walk costs little per entry even for objects with a
    hundred thousand.
    """
    if isinstance(document, str):
        return JsonProblem(root, _UNENCODABLE) if not _encodable(document) else None
    if _sound(document):
        return None
    stack: list[tuple[object, int, _Parent]] = [(document, 1, None)]
    while stack:
        node, depth, parent = stack.pop()
        if isinstance(node, dict):
            keys = list(node)
            items = list(node.values())
        elif isinstance(node, list):
            keys, items = list(range(len(node))), node
        else:
            continue
        if depth > MAX_DEPTH:
            return JsonProblem(_path(parent, root), f"nested deeper than {MAX_DEPTH} levels")
        if isinstance(node, dict) and (bad := _unencodable(keys)) is not None:
            return JsonProblem(_path((parent, keys[bad]), root), f"the key is {_UNENCODABLE}")
        texts = [i for i, item in enumerate(items) if isinstance(item, str)]
        if (bad := _unencodable([items[i] for i in texts])) is not None:
            return JsonProblem(_path((parent, keys[texts[bad]]), root), _UNENCODABLE)
        stack.extend(
            (item, depth + 1, (parent, keys[i]))
            for i, item in enumerate(items)
            if isinstance(item, dict | list)
        )
    return None
