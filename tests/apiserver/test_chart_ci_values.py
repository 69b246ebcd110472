"""The chart as chart-testing and Artifact Hub see it (ADR 0042): every
`ci/*-values.yaml` passes `helm lint --strict` and the schema, renders, and the
API server accepts what it renders; the `helm test` hook asks for no more than
its dry run; and the packaged chart's README links nothing it does not carry.
tests/node/test_chart_on_node.py runs `helm test` for real."""

import re
import tarfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from devcluster import ControlPlane
from tests.support.chart import CHART, accepted, fullname, release_name, render

pytestmark = pytest.mark.api

CI_VALUES = sorted((CHART / "ci").glob("*-values.yaml"))
# Markdown links and images: [text](target) and ![alt](target).
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def test_the_ci_values_cover_every_certificate_mode_and_ha() -> None:
    modes = {
        (yaml.safe_load(path.read_text()) or {}).get("certificates", {}).get("mode", "selfManaged")
        for path in CI_VALUES
    }
    assert modes == {"selfManaged", "certManager", "provided"}
    assert {"default-values.yaml", "ha-values.yaml"} <= {path.name for path in CI_VALUES}


@pytest.mark.parametrize("values", CI_VALUES, ids=lambda path: path.name)
def test_each_ci_values_file_lints_renders_and_is_accepted(
    plane: ControlPlane, namespace: str, values: Path
) -> None:
    lint = plane.helm("lint", "--strict", str(CHART), "-f", str(values))
    assert "[WARNING]" not in lint.stdout, lint.stdout
    assert "[ERROR]" not in lint.stdout, lint.stdout
    objects = render(plane, release_name(), namespace, "-f", str(values))
    assert {"Deployment", "ValidatingWebhookConfiguration"} <= {o["kind"] for o in objects}
    watched = (yaml.safe_load(values.read_text()) or {}).get("watchNamespace")
    if watched and plane.kubectl("get", "namespace", watched, check=False).returncode != 0:
        plane.create_namespace(watched)
    # Objects of the watched namespace go there; kubectl applies one namespace at a time.
    for where in {o["metadata"].get("namespace", namespace) for o in objects}:
        accepted(
            plane, where, [o for o in objects if o["metadata"].get("namespace", namespace) == where]
        )


def _test_objects(plane: ControlPlane, release: str, *args: str) -> list[dict[str, Any]]:
    """The objects of the `helm test` hook, in the order Helm creates them."""
    out = plane.helm("template", release, str(CHART), "--namespace", "ops", *args).stdout
    return [
        doc
        for doc in yaml.safe_load_all(out)
        if doc and doc["metadata"].get("labels", {}).get("app.kubernetes.io/component") == "test"
    ]


def test_the_test_hook_may_only_create_runtimes_where_the_hooks_apply(
    plane: ControlPlane,
) -> None:
    release = release_name()
    objects = _test_objects(plane, release)
    assert [o["kind"] for o in objects] == ["ServiceAccount", "Role", "RoleBinding", "Pod"]
    assert all(o["metadata"]["annotations"]["helm.sh/hook"] == "test" for o in objects)
    service_account, role, binding, pod = objects
    assert role["rules"] == [
        {
            "apiGroups": ["runtime.trussium.io"],
            "resources": ["trussiumruntimes"],
            "verbs": ["create"],
        }
    ]
    assert role["metadata"]["namespace"] == binding["metadata"]["namespace"] == "default"
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": f"{fullname(release)}-test", "namespace": "ops"}
    ]
    assert service_account["metadata"]["namespace"] == pod["metadata"]["namespace"] == "ops"
    (container,) = pod["spec"]["containers"]
    assert container["image"].startswith("ghcr.io/trussiumhq/trussium-operator-python:")
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert "namespaces/default/trussiumruntimes?dryRun=All" in container["args"][0]
    # One watched namespace: the dry run goes there; tests.namespace wins.
    assert {
        o["metadata"]["namespace"]
        for o in _test_objects(plane, release, "--set", "watchNamespace=team-a")
        if o["kind"] in ("Role", "RoleBinding")
    } == {"team-a"}
    chosen = _test_objects(plane, release, "--set", "tests.namespace=smoke")
    assert "namespaces/smoke/trussiumruntimes" in chosen[-1]["spec"]["containers"][0]["args"][0]
    assert _test_objects(plane, release, "--set", "tests.enabled=false") == []


def test_the_packaged_readme_links_nothing_outside_the_chart(
    plane: ControlPlane, tmp_path: Path
) -> None:
    """`helm show readme` and Artifact Hub show the packaged README: a relative link
    there must resolve inside the package, or it breaks."""
    plane.helm("package", str(CHART), "--destination", str(tmp_path))
    (package,) = tmp_path.glob("*.tgz")
    with tarfile.open(package) as archive:
        names = set(archive.getnames())
        member = archive.extractfile("trussium-operator-python/README.md")
        assert member is not None
        readme = member.read().decode()
    broken = []
    for target in LINK.findall(readme):
        path = target.split("#", 1)[0]
        if re.match(r"^(https?|mailto):", target) or not path:
            continue
        resolved = Path("trussium-operator-python", path)
        if ".." in resolved.parts or str(resolved) not in names:
            broken.append(target)
    assert broken == []
