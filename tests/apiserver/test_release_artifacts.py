"""`make release-artifacts` builds what a release publishes, with checksums that
verify, and every artifact carries the one version.

Marked `api` only to keep it out of `make unit`: it needs the pinned helm
(built with the control-plane components), not a running control plane.
"""

import hashlib
import json
import re
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


SBOM = f"trussium_operator-{VERSION}.cdx.json"


def test_dist_holds_the_five_artifacts_and_their_checksums(dist: Path) -> None:
    wheel = f"trussium_operator-{VERSION}-py3-none-any.whl"
    sdist = f"trussium_operator-{VERSION}.tar.gz"
    chart = f"trussium-operator-python-{VERSION}.tgz"
    artifacts = [wheel, sdist, chart, "install.yaml", SBOM]
    assert sorted(p.name for p in dist.iterdir()) == sorted([*artifacts, "SHA256SUMS"])
    sums: dict[str, str] = {}
    for line in (dist / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split("  ", 1)
        sums[name] = digest
    assert sorted(sums) == sorted(artifacts)
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


def test_the_install_bundle_is_the_chart_of_this_version(dist: Path) -> None:
    objects = [doc for doc in yaml.safe_load_all((dist / "install.yaml").read_text()) if doc]
    assert objects[0]["kind"] == "Namespace"
    assert objects[0]["metadata"]["name"] == "trussium-operator-system"
    assert {o["kind"] for o in objects} >= {"CustomResourceDefinition", "Deployment"}
    images = {
        c["image"]
        for o in objects
        if o["kind"] == "Deployment"
        for c in o["spec"]["template"]["spec"]["containers"]
    }
    assert images == {f"ghcr.io/trussiumhq/trussium-operator-python:{VERSION}"}
    assert {o["metadata"]["labels"]["helm.sh/chart"] for o in objects[1:]} == {
        f"trussium-operator-python-{VERSION}"
    }


def test_the_sbom_lists_every_locked_dependency_with_its_hashes(dist: Path) -> None:
    """CycloneDX: the wheel as the root component, each pin of requirements.lock a
    component with the sha256 of every file the lock allows."""
    bom = json.loads((dist / SBOM).read_text())
    assert bom["bomFormat"] == "CycloneDX"
    root = bom["metadata"]["component"]
    assert (root["name"], root["version"]) == ("trussium-operator", VERSION)
    lock = (ROOT / "requirements.lock").read_text()
    pinned = dict(re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)", lock, re.MULTILINE))
    listed = {c["name"]: c for c in bom["components"]}
    assert {name: c["version"] for name, c in listed.items()} == pinned
    for name, component in listed.items():
        hashes = {h["content"] for ref in component["externalReferences"] for h in ref["hashes"]}
        block = lock.split(f"\n{name}==", 1)[1].split("\n    # via", 1)[0]
        assert hashes == set(re.findall(r"--hash=sha256:([0-9a-f]{64})", block)), name
