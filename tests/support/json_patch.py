"""An RFC 6902 applier for the add, replace and remove ops the defaulting hook emits.

Written independently of `common.defaulting`, so the tests that apply its
patches check the patch rather than repeat the code under test. It is strict:
`add` must not overwrite and `replace`/`remove` need an existing member.
"""

import copy
from typing import Any


def apply_json_patch(document: Any, patch: list[dict[str, Any]]) -> Any:
    document = copy.deepcopy(document)
    for op in patch:
        *parents, last = [
            p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]
        ]
        target = document
        for part in parents:
            target = target[int(part)] if isinstance(target, list) else target[part]
        assert (last in target) == (op["op"] != "add"), op
        if op["op"] == "remove":
            del target[last]
        else:
            assert op["op"] in ("add", "replace"), op
            target[last] = copy.deepcopy(op["value"])
    return document
