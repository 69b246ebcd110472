"""The chart README documents every value, and nothing that does not exist; every
install, upgrade and uninstall command of the docs is a step a test runs.

No cluster needed: this compares values.yaml with the README's values table, and
the docs' shell blocks with the steps tests/cluster/test_install_docs.py runs.
"""

import re
from typing import Any

import yaml

from tests.cluster.test_install_docs import STEPS_RUN
from tests.support.doc_steps import REPO, steps, unmarked_blocks

CHART = REPO / "charts" / "trussium-operator"
ROW_KEY = re.compile(r"^\| `([A-Za-z0-9_.]+)` \|", re.MULTILINE)


def documented_keys() -> set[str]:
    readme = (CHART / "README.md").read_text()
    values_section = readme.split("## Values", 1)[1].split("\n## ", 1)[0]
    return set(ROW_KEY.findall(values_section))


def undocumented(values: dict[str, Any], documented: set[str], prefix: str = "") -> list[str]:
    """Keys with no row of their own nor an ancestor's (a documented object covers its fields)."""
    missing: list[str] = []
    for key, value in values.items():
        path = f"{prefix}{key}"
        if path in documented:
            continue
        if isinstance(value, dict) and value:
            missing += undocumented(value, documented, f"{path}.")
        else:
            missing.append(path)
    return missing


def exists(values: dict[str, Any], path: str) -> bool:
    node: Any = values
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def test_every_value_is_documented() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert undocumented(values, documented_keys()) == []


def test_every_documented_value_exists() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert [key for key in sorted(documented_keys()) if not exists(values, key)] == []


# The documents whose install, upgrade and uninstall commands a user copies, and the
# section of each that holds them; tests/cluster/test_install_docs.py runs every step.
INSTALL_DOCS = {
    "README.md": "Install on a cluster with Helm",
    "docs/install.md": "",
    "charts/trussium-operator/README.md": "",
}
LIFECYCLE_COMMAND = re.compile(r"\bhelm (install|upgrade|uninstall)\b|\bkubectl (apply|delete)\b")


def test_every_install_upgrade_and_uninstall_block_is_a_tested_step() -> None:
    """A block without a `<!-- step: NAME -->` marker is not run by any test."""
    unmarked = {
        path: [
            block
            for block in unmarked_blocks(REPO / path, section)
            if LIFECYCLE_COMMAND.search(block)
        ]
        for path, section in INSTALL_DOCS.items()
    }
    assert unmarked == {key: [] for key in INSTALL_DOCS}


def test_the_docs_test_runs_every_step_of_these_documents() -> None:
    marked = {path: set(steps(REPO / path)) for path in INSTALL_DOCS}
    assert marked == {path: set(names) for path, names in STEPS_RUN.items()}
