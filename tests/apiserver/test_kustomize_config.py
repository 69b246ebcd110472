"""The kustomize install, `config/` (ADR 0043): the committed files are what
`make config` renders from the chart, and `kubectl kustomize` (kubectl's own,
what `kubectl apply -k` builds) builds from config/default exactly the objects of
the one-file bundle, which tests/node/test_bundle_on_node.py installs from
config/default on a real node.

Marked `api` for the pinned helm and kubectl; no control plane is started."""

from pathlib import Path
from typing import Any

import pytest
import yaml

from devcluster import ControlPlane
from hack import kustomize
from hack.bundle import NAMESPACE
from hack.bundle import render as render_bundle

pytestmark = pytest.mark.api

Obj = dict[str, Any]


def _sorted(objects: list[Obj]) -> list[Obj]:
    return sorted(
        objects,
        key=lambda o: (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]),
    )


def _built(plane: ControlPlane, install: str) -> list[Obj]:
    out = plane.kubectl("kustomize", str(kustomize.CONFIG / install)).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


def test_committed_config_is_the_generator_output(plane: ControlPlane) -> None:
    generated = kustomize.generate(plane.bin_dir / "helm")
    assert kustomize.stale(kustomize.CONFIG, generated) == [], "run `make config`"


def test_check_mode_reports_staleness_and_writing_fixes_it(
    plane: ControlPlane, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["--helm", str(plane.bin_dir / "helm"), "--config", str(tmp_path)]
    assert kustomize.main([*args, "--check"]) == 1
    assert kustomize.main(args) == 0
    assert kustomize.main([*args, "--check"]) == 0
    deployment = tmp_path / "default" / "deployment-trussium-operator-webhook.yaml"
    deployment.write_text(deployment.read_text() + "# edited\n")
    left_over = tmp_path / "default" / "service-removed-from-the-chart.yaml"
    left_over.write_text("{}\n")
    capsys.readouterr()
    assert kustomize.main([*args, "--check"]) == 1
    assert capsys.readouterr().err.splitlines() == [
        "config/default/deployment-trussium-operator-webhook.yaml is stale: run `make config`",
        "config/default/service-removed-from-the-chart.yaml is stale: run `make config`",
    ]
    assert kustomize.main(args) == 0
    assert not left_over.exists()
    assert kustomize.main([*args, "--check"]) == 0


def test_config_default_builds_the_bundles_objects(plane: ControlPlane) -> None:
    bundle = [doc for doc in yaml.safe_load_all(render_bundle(plane.bin_dir / "helm")) if doc]
    assert _sorted(_built(plane, "default")) == _sorted(bundle)


def test_config_cert_manager_lets_cert_manager_issue_and_inject(plane: ControlPlane) -> None:
    objects = _built(plane, "cert-manager")
    names = {(o["kind"], o["metadata"]["name"]) for o in objects}
    assert {
        ("Certificate", "trussium-operator-webhook"),
        ("Namespace", NAMESPACE),
    } <= names
    assert ("Role", "trussium-operator-controller-webhook-certificates") not in names
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        (config,) = [o for o in objects if o["kind"] == kind]
        assert config["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == (
            f"{NAMESPACE}/trussium-operator-webhook-ca"
        ), "the CA, unchanged when the serving certificate is renewed"
