"""Kubernetes manifests from text: multi-document YAML or JSON, as kubectl reads them.

Text in, JSON-compatible dicts out (no file I/O), for both command-line
tools. Unlike PyYAML's defaults, dates stay strings and duplicate keys are
errors, because the API server would see a string and kubectl refuses
duplicates. `kind: List` documents are expanded into their items.
"""

from typing import Any

import yaml


class ManifestError(ValueError):
    """Text that is not a stream of Kubernetes objects; the message says where and why."""


class _Loader(yaml.SafeLoader):
    """SafeLoader without the timestamp resolver, refusing duplicate keys."""

    yaml_implicit_resolvers = {
        first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r}", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _objects(document: object, where: str) -> list[dict[str, Any]]:
    if not isinstance(document, dict):
        raise ManifestError(
            f"{where}: expected a Kubernetes object (a mapping), got {type(document).__name__}"
        )
    kind = document.get("kind")
    if isinstance(kind, str) and kind.endswith("List") and "items" in document:
        items = document["items"] or []
        if not isinstance(items, list):
            raise ManifestError(f"{where}: the items of a {kind} must be a list")
        return [obj for i, item in enumerate(items) for obj in _objects(item, f"{where}, item {i}")]
    return [document]


def parse_manifests(text: str, source: str = "<input>") -> list[dict[str, Any]]:
    """The objects in `text`, in order; empty documents are skipped.

    Raises ManifestError naming `source`, the document number and the line.
    """
    objects: list[dict[str, Any]] = []
    try:
        for index, document in enumerate(yaml.load_all(text, Loader=_Loader), start=1):
            if document is not None:
                objects += _objects(document, f"{source}: document {index}")
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(error, "problem", None) or str(error)
        raise ManifestError(f"{source}: invalid YAML or JSON{where}: {problem}") from None
    return objects
