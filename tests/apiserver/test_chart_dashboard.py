"""The optional Grafana dashboard ConfigMap: off by default, found by Grafana's
sidecar under its conventional label (or the ones given), carrying the dashboard
file unchanged."""

import json
from pathlib import Path

import pytest
import yaml

from devcluster import ControlPlane
from hack.dashboard import DASHBOARD
from tests.support.chart import find, fullname, release_name, render

pytestmark = pytest.mark.api


def test_off_by_default(plane: ControlPlane, namespace: str) -> None:
    objects = render(plane, release_name(), namespace)
    assert not [o for o in objects if o["metadata"]["name"].endswith("-dashboard")]
    assert all("grafana_dashboard" not in (o["metadata"].get("labels") or {}) for o in objects)


def test_enabled_the_sidecar_finds_it_and_it_is_the_dashboard_file(
    plane: ControlPlane, namespace: str
) -> None:
    release = release_name()
    objects = render(plane, release, namespace, "--set", "grafanaDashboard.enabled=true")
    config_map = find(objects, "ConfigMap", f"{fullname(release)}-dashboard")
    assert config_map["metadata"]["namespace"] == namespace
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    (text,) = config_map["data"].values()
    assert json.loads(text) == json.loads(DASHBOARD.read_text())


def test_labels_annotations_and_namespace_are_configurable(
    plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    release = release_name()
    values = {
        "grafanaDashboard": {
            "enabled": True,
            "namespace": "monitoring",
            "labels": {"grafana_dashboard": None, "dashboards": "trussium"},
            "annotations": {"grafana_folder": "Operators"},
        }
    }
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    config_map = find(
        render(plane, release, namespace, "-f", str(path)),
        "ConfigMap",
        f"{fullname(release)}-dashboard",
    )
    meta = config_map["metadata"]
    assert meta["namespace"] == "monitoring"
    assert meta["labels"]["dashboards"] == "trussium"
    assert "grafana_dashboard" not in meta["labels"]
    assert meta["annotations"] == {"grafana_folder": "Operators"}
