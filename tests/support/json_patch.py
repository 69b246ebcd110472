"""An RFC 6902 applier: add, replace, remove and test, on maps and lists.

Written independently of `common.defaulting` and `controller.runtime.drift`, so the
tests that apply their patches check the patch rather than repeat the code
under test. It is strict: `add` must not overwrite a map member, `replace`,
`remove` and `test` need an existing one, and a failed `test` fails the whole
patch (the fake API server answers that 422, as the real one does).
"""

import copy
from typing import Any


class PatchError(AssertionError):
    """The patch does not apply to the document (in a test, an assertion failure)."""


def apply_json_patch(document: Any, patch: list[dict[str, Any]]) -> Any:
    document = copy.deepcopy(document)
    for op in patch:
        *parents, last = [
            p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]
        ]
        target = document
        try:
            for part in parents:
                target = target[int(part)] if isinstance(target, list) else target[part]
        except (KeyError, IndexError, ValueError, TypeError) as error:
            raise PatchError(f"no parent for {op}") from error
        if isinstance(target, list):
            _on_list(target, last, op)
        else:
            _on_map(target, last, op)
    return document


def _on_map(target: dict[str, Any], last: str, op: dict[str, Any]) -> None:
    if (last in target) != (op["op"] != "add"):
        raise PatchError(f"{op} does not match the document")
    if op["op"] == "remove":
        del target[last]
    elif op["op"] == "test":
        if target[last] != op["value"]:
            raise PatchError(f"test failed: {op['path']}")
    elif op["op"] in ("add", "replace"):
        target[last] = copy.deepcopy(op["value"])
    else:
        raise PatchError(f"unsupported op {op}")


def _on_list(target: list[Any], last: str, op: dict[str, Any]) -> None:
    if op["op"] == "add" and last == "-":
        target.append(copy.deepcopy(op["value"]))
        return
    try:
        index = int(last)
    except ValueError as error:
        raise PatchError(f"{op} needs a list index") from error
    size = len(target) + (op["op"] == "add")
    if not 0 <= index < size:
        raise PatchError(f"{op} is out of range")
    if op["op"] == "add":
        target.insert(index, copy.deepcopy(op["value"]))
    elif op["op"] == "remove":
        del target[index]
    elif op["op"] == "replace":
        target[index] = copy.deepcopy(op["value"])
    elif op["op"] == "test":
        if target[index] != op["value"]:
            raise PatchError(f"test failed: {op['path']}")
    else:
        raise PatchError(f"unsupported op {op}")
