"""The import structure, every package: each may import only the packages below it.

Product code (`common`, `certs`, `cmdline`, `serving`, `offline`, `webhook`,
`controller`) never imports the tests, the local control plane (`devcluster`) or
the build scripts (`hack`); `certs` is a library on `common` alone; the generic
controller machinery (`controller.machinery`) imports neither the Trussium layer
above it nor `common`, so it could serve another kind unchanged; the migration
from the Go operator sits below the runtime reconcile, which sits below the
offline tool (`render` uses its kind registry), which sits below the programs;
`hack` may use `devcluster`, never `tests`. Imports inside functions count too,
and the installed spelling (`trussium_operator.common...`) is the same package as
the folder (`common...`). The same layers are an import-linter contract in
pyproject.toml, so the standard tools read the graph as this test does.
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DISTRIBUTION = "trussium_operator"
PRODUCT = {
    "common",
    "certs",
    "cmdline",
    "serving",
    "offline",
    "webhook",
    "controller",
    "controller.runtime",
    "controller.migration",
    "controller.metrics",
    "controller.machinery",
}
_CONTROLLER_BELOW_RUNTIME = {"controller.machinery", "controller.metrics", "controller.migration"}
# Most specific first: a module belongs to the first package its name starts with.
ALLOWED: dict[str, set[str]] = {
    "common": set(),
    "certs": {"common"},
    "cmdline": {"common"},
    "serving": {"common", "certs", "cmdline"},
    "controller.machinery": set(),
    "controller.metrics": {"common", "serving", "controller.machinery"},
    "controller.migration": {"common", "controller.machinery", "controller.metrics"},
    "controller.runtime": {"common", "cmdline"} | _CONTROLLER_BELOW_RUNTIME,
    "offline": {"common", "cmdline", "controller.runtime"},
    "webhook": {"common", "certs", "cmdline", "serving", "offline"},
    "controller": PRODUCT - {"webhook", "controller"},
    "devcluster": PRODUCT,
    "hack": PRODUCT | {"devcluster"},
    "tests": PRODUCT | {"devcluster", "hack"},
}


def package_of(module: str) -> str | None:
    """The package of a module, under either spelling; None outside the repository."""
    module = module.removeprefix(f"{DISTRIBUTION}.")
    for package in ALLOWED:
        if module == package or module.startswith(f"{package}."):
            return package
    return None


def imported_modules(source: str) -> list[tuple[int, str]]:
    """(line, module) for each absolute import; `from p import m` names `p` and `p.m`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
            found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
    return found


def forbidden(package: str, source: str) -> list[tuple[int, str]]:
    """The imports of `source`, a module of `package`, that its rule forbids."""
    return [
        (line, imported)
        for line, imported in imported_modules(source)
        if (target := package_of(imported)) not in (None, package)
        and target not in ALLOWED[package]
    ]


def violations(package: str) -> list[str]:
    folder = ROOT.joinpath(*package.split("."))
    module_file = folder.with_suffix(".py")  # a "package" may be a single module
    paths = [module_file] if module_file.is_file() else sorted(folder.rglob("*.py"))
    assert paths, f"{package} names no module of the repository"
    found = []
    for path in paths:
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        if package_of(module) != package:
            continue  # a subpackage with rules of its own
        for line, imported in forbidden(package, path.read_text()):
            found.append(f"{path.relative_to(ROOT)}:{line} imports {imported}")
    return found


@pytest.mark.parametrize("package", list(ALLOWED))
def test_package_imports_only_the_packages_below_it(package: str) -> None:
    assert violations(package) == []


@pytest.mark.parametrize(
    ("package", "source", "flagged"),
    [
        ("common", "from trussium_operator.webhook.app import x\n", True),
        ("common", "from trussium_operator import controller\n", True),
        ("certs", "import trussium_operator.cmdline.options\n", True),
        ("controller.machinery", "from trussium_operator.common import api\n", True),
        ("serving", "from trussium_operator.certs.reload import ReloadingTLS\n", False),
        ("cmdline", "from trussium_operator.serving.listener import listen\n", True),
        ("offline", "from trussium_operator.webhook.app import x\n", True),
        ("controller.runtime", "from trussium_operator.offline import render\n", True),
        ("controller.migration", "import trussium_operator.controller.runtime.kinds\n", True),
        ("webhook", "from trussium_operator.common.api import TrussiumRuntime\n", False),
        ("common", "import json\nfrom pydantic import BaseModel\n", False),
    ],
)
def test_a_planted_import_is_judged_under_the_installed_spelling(
    package: str, source: str, flagged: bool
) -> None:
    assert bool(forbidden(package, source)) is flagged


def test_an_import_inside_a_function_is_seen_in_both_spellings() -> None:
    source = "def f():\n    from tests.support import fakekube\n    import hack.demo\n"
    targets = {package_of(module) for _, module in imported_modules(source)}
    assert targets == {"tests", "hack"}
