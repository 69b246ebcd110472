"""kubernetes_asyncio with its generated API classes and models imported on first use.

`import kubernetes_asyncio.client` runs a package `__init__` that imports
every generated API class and model, about 850 modules and 32 MiB of memory
in a process that uses a handful of them (and `kubernetes_asyncio` itself
imports its dynamic client, streams and watches). A program calls
`install()` before anything imports the package: `kubernetes_asyncio`,
`kubernetes_asyncio.client` and its `api` and `models` packages are then
registered without running their `__init__`, and each name they export is
imported when first looked up (PEP 562). `client.V1SubjectAccessReview` is
the same class either way, and what the package's own code looks up
(`getattr(client.models, klass)` when it deserializes) is found the same way.
"""

import importlib
import importlib.util
import re
import sys
from pathlib import Path
from typing import Any

PACKAGE = "kubernetes_asyncio"
LAZY_PACKAGES = (PACKAGE, f"{PACKAGE}.client", f"{PACKAGE}.client.api", f"{PACKAGE}.client.models")
# The generated `__init__` files are one `from <module> import <name>` line per export.
_EXPORT = re.compile(rf"^from ({PACKAGE}\.[\w.]+) import (\w+)$", re.MULTILINE)
_VERSION = re.compile(r"^__version__ = \"([^\"]+)\"$", re.MULTILINE)


def install() -> None:
    """Register the lazy packages; nothing to do once the package is imported whole."""
    if PACKAGE in sys.modules:
        return
    for name in LAZY_PACKAGES:
        _register(name)


def _register(name: str) -> None:
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None or spec.submodule_search_locations is None:
        raise ImportError(f"{name} is not an installed package")
    source = Path(spec.origin).read_text()
    exports = {export: module for module, export in _EXPORT.findall(source)}
    module = importlib.util.module_from_spec(spec)  # not executed: its imports are the cost
    if version := _VERSION.search(source):
        module.__version__ = version.group(1)  # type: ignore[attr-defined]

    def lookup(attribute: str) -> Any:
        """An export, or a submodule (`kubernetes_asyncio.config`), imported now and kept."""
        if attribute.startswith("__"):
            raise AttributeError(f"module {name!r} has no attribute {attribute!r}")
        if attribute in exports:
            value = getattr(importlib.import_module(exports[attribute]), attribute)
        elif importlib.util.find_spec(f"{name}.{attribute}") is not None:
            value = importlib.import_module(f"{name}.{attribute}")
        else:
            raise AttributeError(f"module {name!r} has no attribute {attribute!r}")
        setattr(module, attribute, value)
        return value

    module.__getattr__ = lookup  # type: ignore[method-assign]
    sys.modules[name] = module
    parent, _, child = name.rpartition(".")
    if parent:
        setattr(sys.modules[parent], child, module)
