"""What Artifact Hub and `helm show chart` show of the chart (ADR 0042): its
annotations agree with the chart they describe, the icon is the committed SVG,
and nothing points at the Go operator's repository as if it were this one's."""

import base64
from pathlib import Path
from typing import Any

import yaml

from hack.image.dockerfile import image_config
from hack.image.images import STANDIN_CONFIG

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "trussium-operator"
ICON = REPO / "docs" / "images" / "trussium-operator-icon.svg"
GO_REPOSITORY = "https://github.com/trussiumhq/trussium-operator"
# https://artifacthub.io/docs/topics/annotations/helm/
CHANGE_KINDS = {"added", "changed", "deprecated", "removed", "fixed", "security"}


def _chart() -> dict[str, Any]:
    chart: dict[str, Any] = yaml.safe_load((CHART / "Chart.yaml").read_text())
    return chart


def _annotation(name: str) -> Any:
    return yaml.safe_load(_chart()["annotations"][f"artifacthub.io/{name}"])


def test_the_icon_is_the_committed_svg_inline() -> None:
    encoded = base64.b64encode(ICON.read_bytes()).decode()
    assert _chart()["icon"] == f"data:image/svg+xml;base64,{encoded}"


def test_the_images_annotation_is_the_image_the_chart_runs() -> None:
    image = yaml.safe_load((CHART / "values.yaml").read_text())["image"]
    default = f"{image['registry']}/{image['repository']}:{_chart()['appVersion']}"
    assert [entry["image"] for entry in _annotation("images")] == [default]


def test_changes_and_links_are_what_artifact_hub_reads() -> None:
    changes = _annotation("changes")
    assert changes
    assert {change["kind"] for change in changes} <= CHANGE_KINDS
    assert all(change["description"].strip() for change in changes)
    for link in _annotation("links"):
        assert set(link) == {"name", "url"}
        assert link["url"].startswith("https://")
    assert _chart()["annotations"]["artifacthub.io/prerelease"] in ("true", "false")


def test_no_home_or_sources_until_the_project_has_a_public_home() -> None:
    """The Go operator's repository is not this chart's source: named only as what
    the chart replaces, never as its home, its sources or its image's source."""
    chart = _chart()
    assert "home" not in chart
    assert "sources" not in chart
    go_links = [link for link in _annotation("links") if link["url"] == GO_REPOSITORY]
    assert all(link["name"].startswith("Go operator") for link in go_links)


def test_no_image_names_a_source_until_there_is_one() -> None:
    """`org.opencontainers.image.source` named the Go operator's repository."""
    operator = image_config((REPO / "Dockerfile").read_text())
    for labels in (operator.labels, STANDIN_CONFIG.labels):
        assert "org.opencontainers.image.source" not in labels
    assert operator.labels["org.opencontainers.image.title"] == "trussium-operator-python"
