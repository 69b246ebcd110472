"""`NamespacedName`: the one way an object's `namespace/name` key is built and split.

Work-queue keys, cache keys and mapper results are all this type, so no
module formats or splits the string by hand; a key is built from an object
(`of`) or from its two parts.
"""

from collections.abc import Mapping
from typing import Any, NamedTuple


class NamespacedName(NamedTuple):
    namespace: str
    name: str

    def __str__(self) -> str:
        """`namespace/name`, or the bare name of a cluster-scoped object."""
        return f"{self.namespace}/{self.name}" if self.namespace else self.name

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> "NamespacedName":
        meta = obj["metadata"]
        return cls(meta.get("namespace") or "", meta["name"])

    def fields(self) -> dict[str, str]:
        """As a log line's structured fields."""
        return {"namespace": self.namespace, "name": self.name}
