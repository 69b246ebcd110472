"""One version: the VERSION file is stamped into the package, and the chart and
the image label carry the same string, so a release cannot ship three."""

import importlib.metadata
import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
VERSION = (ROOT / "VERSION").read_text().strip()


def test_version_file_holds_one_semantic_version() -> None:
    assert re.fullmatch(r"\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?", VERSION), VERSION
    assert (ROOT / "VERSION").read_text() == f"{VERSION}\n"


def test_package_reads_its_version_from_the_version_file() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" in pyproject["project"]["dynamic"]
    assert "version" not in pyproject["project"]
    assert pyproject["tool"]["setuptools"]["dynamic"]["version"] == {"file": "VERSION"}
    # What `--version` reports: the installed distribution's metadata.
    assert importlib.metadata.version("trussium-operator") == VERSION


def test_chart_version_and_app_version_match() -> None:
    chart = yaml.safe_load((ROOT / "charts" / "trussium-operator" / "Chart.yaml").read_text())
    assert chart["version"] == VERSION
    assert chart["appVersion"] == VERSION


def test_image_label_defaults_to_the_version() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert re.findall(r"^ARG VERSION=(\S+)$", dockerfile, re.MULTILINE) == [VERSION]
    assert 'org.opencontainers.image.version="${VERSION}"' in dockerfile


def test_changelog_top_section_is_unreleased_or_this_version() -> None:
    changelog = (ROOT / "CHANGELOG.md").read_text()
    headings = re.findall(r"^## \[([^\]]+)\]", changelog, re.MULTILINE)
    assert headings, "CHANGELOG.md has no release section"
    assert headings[0] in ("Unreleased", VERSION), (
        f"the newest section is {headings[0]!r}: a release names the VERSION file's {VERSION}"
    )
