"""The bounds on the spec's lists and maps on a real API server (ADR 0027).

A new runtime over a bound is refused by the CRD schema with the field path.
A runtime stored over a bound before the bounds existed (the Go operator's
CRD had none) is not frozen by them: the API server's validation ratcheting
lets it take status writes and updates that leave the collection as it is,
on every supported minor, so only a change that grows the collection is
refused. The operator reconciles it whole (`TooManyEntries`, tests/pure).
"""

import json
from typing import Any

import pytest

from devcluster import ControlPlane
from devcluster.controller_harness import patch_status
from devcluster.hostoperator import install_crds
from tests.conftest import Kubectl
from tests.support.go_operator import install_go_crd, install_our_crd
from tests.support.stricter_rules import TOLERATED, TOLERATIONS_BOUND
from trussium_operator.common.constants import PLURAL
from trussium_operator.common.ratcheting import TolerableRule
from trussium_operator.common.validation import validate_runtime

pytestmark = pytest.mark.api

OVER = TOLERATED[TolerableRule.TOO_MANY_ENTRIES]


@pytest.fixture(scope="module")
def installed(api_plane: ControlPlane) -> None:
    install_crds(api_plane)


def runtime(name: str, spec: dict[str, Any]) -> str:
    obj = json.loads(json.dumps(OVER))
    obj["metadata"] = {"name": name}
    obj["spec"] = spec
    return json.dumps(obj)


@pytest.mark.usefixtures("installed")
@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        (
            "scheduling",
            OVER["spec"]["scheduling"],
            f"spec.scheduling.tolerations: Too many: {TOLERATIONS_BOUND + 1}: "
            f"must have at most {TOLERATIONS_BOUND} items",
        ),
        (
            "podMetadata",
            {"labels": {f"l{i}": "v" for i in range(65)}},
            "spec.podMetadata.labels: Too many: 65: must have at most 64 items",
        ),
    ],
    ids=["list", "map"],
)
def test_a_new_runtime_over_a_bound_is_refused_with_its_path(
    kubectl: Kubectl, namespace: str, field: str, value: Any, expected: str
) -> None:
    obj = json.loads(runtime("over", OVER["spec"] | {field: value}))
    refused = kubectl("create", "-n", namespace, "-f", "-", input=json.dumps(obj), check=False)
    assert refused.returncode != 0
    assert expected in refused.stderr
    offline = validate_runtime(obj)
    assert not offline.allowed, "the offline validator and the webhook refuse it too"


@pytest.fixture
def stored_over_a_bound(api_plane: ControlPlane, kubectl: Kubectl, namespace: str) -> str:
    """A runtime with 65 tolerations stored under the Go CRD, then our CRD served."""
    install_go_crd(api_plane)
    try:
        kubectl("create", "-n", namespace, "-f", "-", input=runtime("legacy", OVER["spec"]))
    finally:
        install_our_crd(api_plane)
    return "legacy"


def test_a_stored_runtime_over_a_bound_takes_status_and_unrelated_updates(
    kubectl: Kubectl, namespace: str, stored_over_a_bound: str
) -> None:
    name = stored_over_a_bound
    patch_status(kubectl, PLURAL, name, namespace, {"readyReplicas": 1})
    bump = json.dumps({"spec": {"image": {"tag": "9.9.9"}}})
    kubectl("patch", PLURAL, name, "-n", namespace, "--type=merge", "-p", bump)
    stored = json.loads(kubectl("get", PLURAL, name, "-n", namespace, "-o", "json").stdout)
    assert stored["spec"]["image"]["tag"] == "9.9.9"
    assert len(stored["spec"]["scheduling"]["tolerations"]) == TOLERATIONS_BOUND + 1
    assert stored["status"]["readyReplicas"] == 1

    tolerations = [*stored["spec"]["scheduling"]["tolerations"], {"operator": "Exists"}]
    grow = json.dumps({"spec": {"scheduling": {"tolerations": tolerations}}})
    refused = kubectl(
        "patch", PLURAL, name, "-n", namespace, "--type=merge", "-p", grow, check=False
    )
    assert refused.returncode != 0
    assert "spec.scheduling.tolerations: Too many: 66" in refused.stderr
