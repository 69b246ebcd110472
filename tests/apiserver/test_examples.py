"""The manifests the README shows are real: the offline validator, the
renderer and the API server agree with what the README says of them."""

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from devcluster import ControlPlane
from devcluster.hostoperator import install_crds
from trussium_operator.common.constants import KIND
from trussium_operator.common.defaulting import apply_defaults
from trussium_operator.common.validation import validate_runtime

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
VALID = [
    "runtime.yaml",
    "runtime-production.yaml",
    "runtime-autoscaling.yaml",
    "runtime-observed.yaml",
]
SCRIPTS = Path(sys.executable).parent
# What examples/invalid-runtime.yaml gets wrong (the README shows the rejection).
INVALID_FIELDS = (
    "spec.provider.baseURL",
    "spec.podMetadata.labels",
    "spec.podMetadata.annotations",
    "spec.resources",
    "spec.autoscaling",
    "spec.scheduling.tolerations[0]",
)


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, check=False)


@pytest.mark.parametrize("name", VALID)
def test_valid_example_passes_the_offline_validator_and_renders(name: str) -> None:
    path = str(EXAMPLES / name)
    validated = run(str(SCRIPTS / "trussium-webhook"), "validate", "-f", path)
    assert validated.returncode == 0, validated.stdout + validated.stderr
    rendered = run(str(SCRIPTS / "trussium-controller"), "render", "-f", path)
    assert rendered.returncode == 0, rendered.stderr
    assert "kind: Deployment" in rendered.stdout


def test_invalid_example_is_rejected_offline_with_field_paths() -> None:
    result = run(
        str(SCRIPTS / "trussium-webhook"), "validate", "-f", str(EXAMPLES / "invalid-runtime.yaml")
    )
    assert result.returncode == 1
    for field in INVALID_FIELDS:
        assert field in result.stdout + result.stderr, field


@pytest.mark.api
def test_api_server_accepts_the_valid_examples(plane: ControlPlane, namespace: str) -> None:
    install_crds(plane)
    for name in [*VALID, "secrets.yaml"]:
        plane.kubectl("apply", "-n", namespace, "-f", str(EXAMPLES / name))
    names = plane.kubectl(
        "get", "truntime", "-n", namespace, "-o", "jsonpath={.items[*].metadata.name}"
    ).stdout.split()
    assert sorted(names) == ["assistant", "batch", "chat", "support"]


def readme_runtimes() -> list[dict[str, Any]]:
    """Every TrussiumRuntime in the README's ```yaml blocks, exactly as shown."""
    readme = (REPO / "README.md").read_text()
    blocks = re.findall(r"```yaml\n(.*?)```", readme, re.S)
    documents = [doc for block in blocks for doc in yaml.safe_load_all(block)]
    return [doc for doc in documents if isinstance(doc, dict) and doc.get("kind") == KIND]


def test_the_readme_shows_a_runtime_that_validates() -> None:
    runtimes = readme_runtimes()
    assert runtimes, "the README should show a complete TrussiumRuntime"
    for runtime in runtimes:
        result = validate_runtime(apply_defaults(runtime).object)
        assert result.errors == (), result.errors


@pytest.mark.api
def test_the_api_server_accepts_the_readme_runtime(plane: ControlPlane, namespace: str) -> None:
    install_crds(plane)
    for runtime in readme_runtimes():
        plane.kubectl(
            "apply", "--dry-run=server", "-n", namespace, "-f", "-", input=json.dumps(runtime)
        )
