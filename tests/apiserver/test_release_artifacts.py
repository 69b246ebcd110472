"""`make release-artifacts` builds what a release publishes, with checksums that
verify, and every artifact carries the one version.

Marked `api` only to keep it out of `make unit`: it needs the pinned helm
(built with the control-plane components), not a running control plane.
"""

import hashlib
import subprocess
import tarfile
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.api

ROOT = Path(__file__).resolve().parents[2]
VERSION = (ROOT / "VERSION").read_text().strip()


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    result = subprocess.run(
        ["make", "--no-print-directory", "release-artifacts", f"DIST={out}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    return out


def test_dist_holds_the_three_artifacts_and_their_checksums(dist: Path) -> None:
    wheel = f"trussium_operator-{VERSION}-py3-none-any.whl"
    sdist = f"trussium_operator-{VERSION}.tar.gz"
    chart = f"trussium-operator-python-{VERSION}.tgz"
    assert sorted(p.name for p in dist.iterdir()) == sorted([wheel, sdist, chart, "SHA256SUMS"])
    sums: dict[str, str] = {}
    for line in (dist / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split("  ", 1)
        sums[name] = digest
    assert sorted(sums) == sorted([wheel, sdist, chart])
    for name, digest in sums.items():
        assert hashlib.sha256((dist / name).read_bytes()).hexdigest() == digest, name


def test_every_artifact_carries_the_version_and_the_licence(dist: Path) -> None:
    with zipfile.ZipFile(dist / f"trussium_operator-{VERSION}-py3-none-any.whl") as wheel:
        info = f"trussium_operator-{VERSION}.dist-info"
        metadata = Parser().parsestr(wheel.read(f"{info}/METADATA").decode())
        assert metadata["Version"] == VERSION
        assert metadata["License-Expression"] == "Apache-2.0"
        assert "Apache License" in wheel.read(f"{info}/licenses/LICENSE").decode()
        entry_points = wheel.read(f"{info}/entry_points.txt").decode()
        assert "trussium-webhook" in entry_points
        assert "trussium-controller" in entry_points

    with tarfile.open(dist / f"trussium_operator-{VERSION}.tar.gz") as sdist:
        top = f"trussium_operator-{VERSION}"
        names = set(sdist.getnames())
        # The sdist rebuilds the same wheel: the version source and the licence travel with it.
        assert {f"{top}/VERSION", f"{top}/LICENSE", f"{top}/CHANGELOG.md"} <= names
        version_file = sdist.extractfile(f"{top}/VERSION")
        assert version_file is not None
        assert version_file.read().decode().strip() == VERSION

    with tarfile.open(dist / f"trussium-operator-python-{VERSION}.tgz") as chart:
        chart_file = chart.extractfile("trussium-operator-python/Chart.yaml")
        assert chart_file is not None
        metadata = yaml.safe_load(chart_file)
        assert (metadata["name"], metadata["version"], metadata["appVersion"]) == (
            "trussium-operator-python",
            VERSION,
            VERSION,
        )
        assert "trussium-operator-python/files/crds/trussiumruntimes.runtime.trussium.io.yaml" in (
            chart.getnames()
        )
