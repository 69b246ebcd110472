"""Every install, upgrade and uninstall command of README.md, docs/install.md and
the chart README, run verbatim on the local control plane (the cluster profile: its
kwok nodes report the chart's Pods Ready, so `rollout status` returns as on a cluster
that pulls the image). The steps are read from the Markdown, so the docs cannot
drift from what works; tests/pure/test_chart_docs.py holds every such block to be a
step listed here. Also the CRD lifecycle those docs promise: `helm upgrade` upgrades
the CRD, applying it yourself needs `--force-conflicts`, and a release whose CRD came
from `crds/` takes it over with the documented commands.
"""

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from devcluster import ControlPlane
from devcluster.certmanager import install_crds as install_cert_manager_crds
from devcluster.hostoperator import CRD_NAME, install_crds
from devcluster.polling import wait_for
from hack.bundle import render as render_bundle
from tests.support.chart import CHART
from tests.support.doc_steps import REPO, run_step, steps

pytestmark = pytest.mark.cluster

README = "README.md"
INSTALL = "docs/install.md"
CHART_README = "charts/trussium-operator/README.md"
STEPS_RUN = {
    README: ("install",),
    INSTALL: (
        "install",
        "install-from-registry",
        "install-one-namespace",
        "install-cert-manager",
        "install-provided",
        "upgrade",
        "upgrade-crd-yourself",
        "adopt-crd",
        "uninstall",
        "remove-everything",
        "install-dev",
        "install-bundle",
        "remove-bundle-operator",
        "delete-bundle",
        "install-kustomize",
        "delete-kustomize",
    ),
    CHART_README: ("install", "install-cert-manager", "install-provided", "upgrade-uninstall"),
}
RELEASE = "trussium-operator"
NAMESPACE = "trussium-system"
# Namespaces the documented commands use; a fresh cluster has none of them.
BUNDLE_NAMESPACE = "trussium-operator-system"
DOC_NAMESPACES = (NAMESPACE, "trussium-dev", "team-a", BUNDLE_NAMESPACE)
# A column the CRD of the "earlier chart" lacks, so that an upgrade visibly changes the CRD.
ADDED_COLUMN = "Reason"
GONE_TIMEOUT_SECONDS = 120.0


def _step(plane: ControlPlane, document: str, name: str, cwd: Path = REPO) -> str:
    code, output = run_step(plane, steps(REPO / document)[name], cwd=cwd)
    assert code == 0, f"{document}, step {name}:\n{output}"
    return output


def _wait_gone(plane: ControlPlane, *target: str) -> None:
    wait_for(
        lambda: (
            not plane.kubectl("get", *target, "--ignore-not-found", "-o", "name").stdout.strip()
        ),
        f"{target} gone",
        GONE_TIMEOUT_SECONDS,
    )


def _fresh(plane: ControlPlane) -> None:
    """The cluster as the docs assume it: no release, no CRD, none of their namespaces."""
    for release, namespace in ((RELEASE, NAMESPACE), ("dev", "trussium-dev")):
        plane.helm("uninstall", release, "-n", namespace, "--ignore-not-found", "--wait")
    plane.kubectl("delete", "crd", CRD_NAME, "--ignore-not-found", "--wait=true", timeout=300)
    for namespace in DOC_NAMESPACES:
        plane.kubectl("delete", "namespace", namespace, "--ignore-not-found", "--wait=false")
    for namespace in DOC_NAMESPACES:
        _wait_gone(plane, "namespace", namespace)


@pytest.fixture
def fresh(plane: ControlPlane) -> Iterator[None]:
    """A fresh cluster; afterwards, the CRD as the other tests expect it (applied, no release)."""
    _fresh(plane)
    yield
    _fresh(plane)
    install_crds(plane)


def _crd(plane: ControlPlane) -> dict[str, Any]:
    crd: dict[str, Any] = json.loads(plane.kubectl("get", "crd", CRD_NAME, "-o", "json").stdout)
    return crd


def _columns(plane: ControlPlane) -> set[str]:
    version = _crd(plane)["spec"]["versions"][0]
    return {column["name"] for column in version.get("additionalPrinterColumns", [])}


def _owner(plane: ControlPlane) -> dict[str, str]:
    annotations: dict[str, str] = _crd(plane)["metadata"].get("annotations", {})
    return {k: v for k, v in annotations.items() if k.startswith(("meta.helm.sh/", "helm.sh/"))}


def _release_deployments(plane: ControlPlane, namespace: str = NAMESPACE) -> list[str]:
    out = plane.kubectl(
        "get", "deployments", "-n", namespace, "-l", "app.kubernetes.io/managed-by=Helm",
        "-o", "name", "--ignore-not-found",
    )  # fmt: skip
    return out.stdout.split()


def _earlier_chart(tmp_path: Path, crd_in_crds_dir: bool) -> Path:
    """This chart as an earlier version left it: the CRD without ADDED_COLUMN and, with
    crd_in_crds_dir, in `crds/` (installed once by Helm, owned by no release)."""
    chart = tmp_path / "earlier" / "trussium-operator"
    shutil.copytree(CHART, chart)
    path = chart / "files" / "crds" / f"{CRD_NAME}.yaml"
    crd = yaml.safe_load(path.read_text())
    version = crd["spec"]["versions"][0]
    version["additionalPrinterColumns"] = [
        c for c in version["additionalPrinterColumns"] if c["name"] != ADDED_COLUMN
    ]
    path.write_text(yaml.safe_dump(crd, sort_keys=False))
    if crd_in_crds_dir:
        (chart / "crds").mkdir()
        path.rename(chart / "crds" / path.name)
        (chart / "templates" / "crd.yaml").unlink()
    return chart


def _install_earlier(plane: ControlPlane, chart: Path) -> None:
    plane.helm("install", RELEASE, str(chart), "-n", NAMESPACE, "--create-namespace")
    assert ADDED_COLUMN not in _columns(plane)


def _workdir_with_certificates(tmp_path: Path) -> Path:
    """A directory holding the docs' tls.crt, tls.key and ca.crt, and the chart's path."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "charts").symlink_to(REPO / "charts")
    subprocess.run(
        [
            str(Path(sys.executable).parent / "trussium-webhook"), "certs", "generate",
            "--out", str(work), "--dns-name", f"{RELEASE}-webhook.{NAMESPACE}.svc",
        ],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    return work


def _uninstall(plane: ControlPlane, release: str = RELEASE, namespace: str = NAMESPACE) -> None:
    plane.helm("uninstall", release, "-n", namespace, "--wait")
    plane.kubectl("delete", "namespace", namespace, "--wait=false")
    _wait_gone(plane, "namespace", namespace)


def test_install_upgrade_uninstall_as_written(plane: ControlPlane, fresh: None) -> None:
    _step(plane, README, "install")
    assert len(_release_deployments(plane)) == 2
    assert _owner(plane) == {
        "meta.helm.sh/release-name": RELEASE,
        "meta.helm.sh/release-namespace": NAMESPACE,
        "helm.sh/resource-policy": "keep",
    }

    plane.helm("upgrade", RELEASE, str(CHART), "-n", NAMESPACE, "--reuse-values",
               "--set", "controller.workers=7")  # fmt: skip
    _step(plane, INSTALL, "upgrade")
    values = json.loads(plane.helm("get", "values", RELEASE, "-n", NAMESPACE, "-o", "json").stdout)
    assert values == {"controller": {"workers": 7}}, "the user's value kept, nothing else"
    # The chart README's upgrade and uninstall, then the same again after a new install:
    # the CRD kept by the first uninstall is taken over by the release of the same name.
    _step(plane, CHART_README, "upgrade-uninstall")
    assert _release_deployments(plane) == []
    assert _owner(plane)["helm.sh/resource-policy"] == "keep"
    _step(plane, INSTALL, "install")
    _step(plane, INSTALL, "uninstall")
    assert _release_deployments(plane) == []
    assert ADDED_COLUMN in _columns(plane), "the CRD outlives the release"
    _step(plane, INSTALL, "remove-everything")
    _wait_gone(plane, "crd", CRD_NAME)


def test_every_documented_install_variant(plane: ControlPlane, fresh: None, tmp_path: Path) -> None:
    for document in (INSTALL, CHART_README):
        _step(plane, document, "install")
        _uninstall(plane)
    _step(plane, INSTALL, "install-from-registry")
    webhook = plane.kubectl(
        "get", "deployment", f"{RELEASE}-webhook", "-n", NAMESPACE,
        "-o", "jsonpath={.spec.template.spec.containers[0].image}",
    ).stdout  # fmt: skip
    assert webhook.startswith("registry.example/trussiumhq/trussium-operator-python:")
    _uninstall(plane)

    plane.create_namespace("team-a")
    _step(plane, INSTALL, "install-one-namespace")
    _uninstall(plane)

    install_cert_manager_crds(plane)
    for document in (INSTALL, CHART_README):
        _step(plane, document, "install-cert-manager")
        plane.kubectl("get", "certificate", f"{RELEASE}-webhook", "-n", NAMESPACE)
        _uninstall(plane)

    work = _workdir_with_certificates(tmp_path)
    for document in (INSTALL, CHART_README):
        _step(plane, document, "install-provided", cwd=work)
        bundle = plane.kubectl(
            "get", "validatingwebhookconfiguration", RELEASE,
            "-o", "jsonpath={.webhooks[0].clientConfig.caBundle}",
        ).stdout  # fmt: skip
        assert bundle, "the provided CA bundle is set"
        _uninstall(plane)

    # Development, on a cluster of its own (the CRD belongs to no release yet): no webhook
    # Deployment, Service or PodDisruptionBudget, no controller Pod.
    _fresh(plane)
    _step(plane, INSTALL, "install-dev")
    assert _release_deployments(plane, "trussium-dev") == [
        "deployment.apps/dev-trussium-operator-controller"
    ]
    pdbs = plane.kubectl("get", "pdb", "-n", "trussium-dev", "-o", "name").stdout.split()
    assert pdbs == ["poddisruptionbudget.policy/dev-trussium-operator-controller"]
    _uninstall(plane, "dev", "trussium-dev")


def test_helm_upgrade_upgrades_the_crd(plane: ControlPlane, fresh: None, tmp_path: Path) -> None:
    _install_earlier(plane, _earlier_chart(tmp_path, crd_in_crds_dir=False))
    _step(plane, INSTALL, "upgrade")
    assert ADDED_COLUMN in _columns(plane)


def test_applying_the_crd_yourself_needs_force_conflicts(
    plane: ControlPlane, fresh: None, tmp_path: Path
) -> None:
    _install_earlier(plane, _earlier_chart(tmp_path, crd_in_crds_dir=False))
    crds = "charts/trussium-operator/files/crds/"
    without = plane.kubectl("apply", "--server-side", "-f", str(REPO / crds), check=False)
    assert without.returncode != 0
    assert "conflict" in without.stderr.lower(), without.stderr
    assert (
        f"kubectl apply --server-side --force-conflicts -f {crds}"
        in (steps(REPO / INSTALL)["upgrade-crd-yourself"])
    )
    _step(plane, INSTALL, "upgrade-crd-yourself")
    assert ADDED_COLUMN in _columns(plane)


def test_a_release_whose_crd_came_from_crds_takes_it_over(
    plane: ControlPlane, fresh: None, tmp_path: Path
) -> None:
    _install_earlier(plane, _earlier_chart(tmp_path, crd_in_crds_dir=True))
    assert "meta.helm.sh/release-name" not in _owner(plane)
    code, output = run_step(plane, steps(REPO / INSTALL)["upgrade"])
    assert code != 0
    assert "invalid ownership metadata" in output, "why the docs' takeover step is needed"
    _step(plane, INSTALL, "adopt-crd")
    assert _owner(plane)["meta.helm.sh/release-name"] == RELEASE
    assert _owner(plane)["helm.sh/resource-policy"] == "keep"
    assert ADDED_COLUMN in _columns(plane)


def test_the_bundle_as_written(plane: ControlPlane, fresh: None, tmp_path: Path) -> None:
    """install.yaml (made by `make bundle`) applied, its operator removed with the
    CRD kept, applied again, then deleted with everything (tests/node runs its Pods)."""
    work = tmp_path / "work"
    (work / "dist").mkdir(parents=True)
    bundle = work / "dist" / "install.yaml"
    bundle.write_text(render_bundle(plane.bin_dir / "helm"))
    try:
        _step(plane, INSTALL, "install-bundle", cwd=work)
        assert len(_release_deployments(plane, BUNDLE_NAMESPACE)) == 2
        assert "helm.sh/resource-policy" not in _owner(plane), "no Helm release to keep it from"

        _step(plane, INSTALL, "remove-bundle-operator", cwd=work)
        _wait_gone(plane, "deployments", "-n", BUNDLE_NAMESPACE)
        for kind in ("mutatingwebhookconfiguration", "validatingwebhookconfiguration"):
            assert plane.kubectl("get", kind, RELEASE, check=False).returncode != 0
        _crd(plane)  # kept, and with it every runtime
        plane.kubectl("get", "namespace", BUNDLE_NAMESPACE)

        _step(plane, INSTALL, "install-bundle", cwd=work)
        _step(plane, INSTALL, "delete-bundle", cwd=work)
        _wait_gone(plane, "crd", CRD_NAME)
        _wait_gone(plane, "namespace", BUNDLE_NAMESPACE)
        left = plane.kubectl(
            "get", "clusterroles,clusterrolebindings", "-o", "name",
            "-l", f"app.kubernetes.io/instance={RELEASE}",
        ).stdout  # fmt: skip
        assert left == ""
    finally:
        plane.kubectl("delete", "-f", str(bundle), "--ignore-not-found", "--wait=false")


def test_the_kustomize_install_as_written(plane: ControlPlane, fresh: None) -> None:
    """config/default applied with kubectl's own kustomize, then deleted with the
    runtimes first (tests/node runs its Pods; ADR 0043)."""
    _step(plane, INSTALL, "install-kustomize")
    assert len(_release_deployments(plane, BUNDLE_NAMESPACE)) == 2
    assert "helm.sh/resource-policy" not in _owner(plane), "no Helm release to keep it from"
    try:
        _step(plane, INSTALL, "delete-kustomize")
        _wait_gone(plane, "crd", CRD_NAME)
        _wait_gone(plane, "namespace", BUNDLE_NAMESPACE)
    finally:
        plane.kubectl(
            "delete", "-k", str(REPO / "config" / "default"), "--ignore-not-found", "--wait=false"
        )
