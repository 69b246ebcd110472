"""The chart README documents every value, and nothing that does not exist.

No cluster needed: this compares values.yaml with the README's values table.
"""

import re
from pathlib import Path
from typing import Any

import yaml

CHART = Path(__file__).resolve().parents[2] / "charts" / "trussium-operator"
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
