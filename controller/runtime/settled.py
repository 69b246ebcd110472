"""Skipping a reconcile whose inputs are those the last one left behind.

A reconcile reads the runtime, each managed object and the referenced
Secrets, all from the caches, and every one of them carries a
resourceVersion that moves with any change. When a reconcile has done its
work, what it read and wrote is recorded: the runtime as last written, each
managed object as its apply answered (or as cached, where nothing was
applied), and the Secrets' presence and versions. The watch events of its own
writes then bring the caches to exactly that, and a reconcile they cause
would change nothing: it is skipped. The echo of a write often arrives
before the write's answer has resumed the reconcile that sent it, so the
comparison is made when the next reconcile starts, not when the event
arrives. A failed reconcile leaves no record, so its retry runs in full.
"""

from collections.abc import Hashable

from trussium_operator.controller.machinery.names import NamespacedName

# What a reconcile depends on, each part comparable: versions, presence, outcomes.
Inputs = tuple[Hashable, ...]


class SettledInputs:
    def __init__(self) -> None:
        self._settled: dict[NamespacedName, Inputs] = {}

    def unchanged(self, key: NamespacedName, inputs: Inputs) -> bool:
        return self._settled.get(key) == inputs

    def record(self, key: NamespacedName, inputs: Inputs) -> None:
        self._settled[key] = inputs

    def forget(self, key: NamespacedName) -> None:
        self._settled.pop(key, None)
