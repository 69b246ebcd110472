"""Which cluster the tests and the demo use: the local plane unless the user opts in."""

from pathlib import Path

import pytest

from devcluster.external import ClusterChoiceError, chosen_kubeconfig


def test_a_kubeconfig_alone_never_chooses_a_cluster(tmp_path: Path) -> None:
    config = tmp_path / "production.kubeconfig"
    config.write_text("apiVersion: v1\n")
    assert chosen_kubeconfig({"KUBECONFIG": str(config)}) is None
    assert chosen_kubeconfig({"KUBECONFIG": str(config), "TRUSSIUM_CLUSTER": "local"}) is None


def test_opting_in_chooses_the_kubeconfig(tmp_path: Path) -> None:
    config = tmp_path / "kind.kubeconfig"
    config.write_text("apiVersion: v1\n")
    env = {"KUBECONFIG": str(config), "TRUSSIUM_CLUSTER": "kubeconfig"}
    assert chosen_kubeconfig(env) == config


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"TRUSSIUM_CLUSTER": "kind"}, "TRUSSIUM_CLUSTER='kind': expected 'kubeconfig'"),
        ({"TRUSSIUM_CLUSTER": "kubeconfig"}, "needs KUBECONFIG set to one kubeconfig file"),
        (
            {"TRUSSIUM_CLUSTER": "kubeconfig", "KUBECONFIG": "/a:/b"},
            "needs KUBECONFIG set to one kubeconfig file (got '/a:/b')",
        ),
        ({"TRUSSIUM_CLUSTER": "kubeconfig", "KUBECONFIG": "/nowhere"}, "/nowhere: no such file"),
    ],
)
def test_a_choice_that_names_no_one_cluster_is_refused(env: dict[str, str], message: str) -> None:
    with pytest.raises(ClusterChoiceError) as raised:
        chosen_kubeconfig(env)
    assert message in str(raised.value)
