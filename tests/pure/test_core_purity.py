"""The functional core does no I/O: it imports no CLI parsing, logging, event loop, HTTP or
Kubernetes client, nothing from the build scripts in hack/, and calls nothing that
writes files or streams, dumps YAML or configures logging."""

import ast
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

from trussium_operator import common

FORBIDDEN = ("argparse", "logging", "asyncio", "aiohttp", "kubernetes_asyncio", "hack")
# Calls (as `name(...)` or `x.name(...)`) that only a shell makes.
FORBIDDEN_CALLS = {
    "open": "opens a file",
    "print": "writes to a stream",
    "write": "writes to a stream",
    "write_text": "writes a file",
    "write_bytes": "writes a file",
    "mkdir": "creates a folder",
    "unlink": "deletes a file",
    "dump": "dumps YAML or JSON to a stream",
    "dump_all": "dumps YAML to a stream",
    "safe_dump": "dumps YAML",
    "safe_dump_all": "dumps YAML",
    "basicConfig": "configures logging",
    "dictConfig": "configures logging",
    "fileConfig": "configures logging",
    "addHandler": "configures logging",
    "setLevel": "configures logging",
    "setFormatter": "configures logging",
}
CORE = Path(common.__file__).parent


def shell_calls(source: str) -> list[str]:
    """`line N: name() what it does` for each forbidden call in `source`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
        if name in FORBIDDEN_CALLS:
            found.append(f"line {node.lineno}: {name}() {FORBIDDEN_CALLS[name]}")
    return found


def test_importing_the_core_loads_no_io_machinery() -> None:
    modules = sorted(
        f"trussium_operator.common.{m.name}" for m in pkgutil.iter_modules(common.__path__)
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


def test_the_core_writes_no_files_dumps_no_yaml_and_configures_no_logging() -> None:
    sources = sorted(CORE.glob("*.py"))
    assert len(sources) > 10
    found = {p.name: calls for p in sources if (calls := shell_calls(p.read_text()))}
    assert found == {}


@pytest.mark.parametrize(
    "source",
    [
        "open('out.yaml', 'w')",
        "Path('x').write_text(text)",
        "yaml.safe_dump(obj, stream)",
        "json.dump(obj, stream)",
        "logging.getLogger().setLevel('DEBUG')",
        "root.addHandler(handler)",
        "sys.stderr.write(line)",
        "print(value)",
    ],
)
def test_each_shell_call_is_caught(source: str) -> None:
    assert shell_calls(source)


def test_pure_calls_pass() -> None:
    assert shell_calls("json.dumps(obj)\nmodel.model_dump()\nyaml.load_all(text, Loader=L)") == []
