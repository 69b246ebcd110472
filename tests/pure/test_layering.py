"""The import structure, every package: each may import only the packages below it.

Product code (`common`, `cmdline`, `certs`, `webhook`, `controller`) never imports
the tests, the local control plane (`devcluster`) or the build scripts (`hack`);
the generic controller machinery (`controller.machinery`) imports neither the
Trussium layer above it nor `common`, so it could serve another kind unchanged;
`hack` may use `devcluster`, never `tests`. Imports inside functions count too.
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = {"common", "cmdline", "certs", "webhook", "controller", "controller.machinery"}
# Most specific first: a module belongs to the first package its name starts with.
ALLOWED: dict[str, set[str]] = {
    "common": set(),
    "cmdline": {"common"},
    "certs": {"common", "cmdline"},
    "webhook": {"common", "cmdline", "certs"},
    "controller.machinery": set(),
    "controller": {"common", "cmdline", "certs", "controller.machinery"},
    "devcluster": PRODUCT,
    "hack": PRODUCT | {"devcluster"},
    "tests": PRODUCT | {"devcluster", "hack"},
}


def package_of(module: str) -> str | None:
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


def violations(package: str) -> list[str]:
    folder = ROOT.joinpath(*package.split("."))
    found = []
    for path in sorted(folder.rglob("*.py")):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        if package_of(module) != package:
            continue  # a subpackage with rules of its own
        for line, imported in imported_modules(path.read_text()):
            target = package_of(imported)
            if target not in (None, package) and target not in ALLOWED[package]:
                found.append(f"{path.relative_to(ROOT)}:{line} imports {imported}")
    return found


@pytest.mark.parametrize("package", list(ALLOWED))
def test_package_imports_only_the_packages_below_it(package: str) -> None:
    assert violations(package) == []


def test_an_import_inside_a_function_is_seen_in_both_spellings() -> None:
    source = "def f():\n    from tests.support import fakekube\n    import hack.demo\n"
    targets = {package_of(module) for _, module in imported_modules(source)}
    assert targets == {"tests", "hack"}
