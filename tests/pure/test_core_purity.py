"""The functional core imports no I/O machinery: no CLI parsing, logging, event loop,
HTTP or Kubernetes client, and nothing from the build scripts in hack/."""

import pkgutil
import subprocess
import sys

import common

# common.logs configures the programs' logging: the one module allowed to import it.
OUTSIDE_THE_CORE = {"logs"}
FORBIDDEN = ("argparse", "logging", "asyncio", "aiohttp", "kubernetes_asyncio", "hack")


def test_importing_the_core_loads_no_io_machinery() -> None:
    modules = sorted(
        f"common.{m.name}"
        for m in pkgutil.iter_modules(common.__path__)
        if m.name not in OUTSIDE_THE_CORE
    )
    probe = (
        "import importlib, sys\n"
        f"for name in {modules!r}: importlib.import_module(name)\n"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {FORBIDDEN!r}))\n"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    ).stdout.strip()
    assert len(modules) > 10
    assert loaded == "[]", f"the core imports I/O machinery: {loaded}"
