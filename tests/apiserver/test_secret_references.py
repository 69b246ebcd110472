"""Referencing a Secret needs the right to read it (ADR 0034), on a real API server.

Users are impersonated by the cluster admin and bound to the chart's
`trussiumruntime-editor` ClusterRole in a fresh namespace: alice has nothing
else, bob's group may also `get` the provider key's Secret. The webhook runs
as in tests/apiserver/test_webhook.py (a subprocess on 127.0.0.1, URL-based
configurations selecting namespaces by label), once with the rule and once
without it, and asks the API server with the admin's kubeconfig.
"""

import base64
import json
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devcluster import ControlPlane
from devcluster.hostoperator import install_crds
from devcluster.layout import free_port
from devcluster.polling import wait_for
from tests.apiserver.test_webhook import (
    EVENTUALLY_SECONDS,
    RunningWebhook,
    _generate,
    _registered,
    _runtime,
    _select,
    _serving,
)
from tests.conftest import Kubectl
from tests.support.chart import CHART, fullname, release_name
from trussium_operator.common.constants import PLURAL

pytestmark = pytest.mark.api

KEY_SECRET = "openai-key"
READERS = "key-readers"
KEY = {"name": KEY_SECRET, "key": "api-key"}
COLLECTOR = "https://collector.example.net/v1"


@pytest.fixture(scope="module")
def crd(api_plane: ControlPlane) -> None:
    install_crds(api_plane)


@pytest.fixture(scope="module")
def editor_role(api_plane: ControlPlane, crd: None) -> Iterator[str]:
    """The chart's TrussiumRuntime access roles, applied; yields the editor's name."""
    release = release_name()
    rendered = api_plane.helm(
        "template", release, str(CHART), "--show-only", "templates/rbac-runtime-access.yaml"
    ).stdout
    api_plane.kubectl("apply", "-f", "-", input=rendered)
    name = fullname(release)
    yield f"{name}-trussiumruntime-editor"
    api_plane.kubectl("delete", "-f", "-", "--ignore-not-found", input=rendered)


def _webhook(plane: ControlPlane, work: Path, *flags: str) -> Iterator[RunningWebhook]:
    cert_dir, ca_dir, log = work / "serving", work / "ca", work / "webhook.log"
    assert _generate(cert_dir, ca_dir) == 0
    ca_bundle = base64.b64encode((cert_dir / "ca.crt").read_bytes()).decode()
    port, selector_value = free_port(), secrets.token_hex(4)
    with (
        _serving(plane, log, port, f"--cert-dir={cert_dir}", *flags),
        _registered(plane, port, ca_bundle, selector_value),
    ):
        yield RunningWebhook(port, cert_dir, ca_dir, selector_value, log)


@pytest.fixture(scope="module")
def checking(
    api_plane: ControlPlane, crd: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningWebhook]:
    """The webhook as the chart runs it by default: references authorized."""
    yield from _webhook(api_plane, tmp_path_factory.mktemp("checking"))


@pytest.fixture(scope="module")
def unchecked(
    api_plane: ControlPlane, crd: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningWebhook]:
    """The webhook with the rule switched off."""
    yield from _webhook(
        api_plane, tmp_path_factory.mktemp("unchecked"), "--no-authorize-secret-references"
    )


@pytest.fixture(scope="module")
def unanswered(
    api_plane: ControlPlane, crd: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningWebhook]:
    """The webhook with the rule, as a ServiceAccount that may not create access reviews:
    each one fails (403)."""
    account = f"no-rights-{secrets.token_hex(3)}"
    api_plane.kubectl("create", "serviceaccount", account, "-n", "default")
    token = api_plane.kubectl("create", "token", account, "-n", "default").stdout.strip()
    kubeconfig = api_plane.token_kubeconfig(token, account)
    try:
        yield from _webhook(
            api_plane, tmp_path_factory.mktemp("unanswered"), f"--kubeconfig={kubeconfig}"
        )
    finally:
        api_plane.kubectl("delete", "serviceaccount", account, "-n", "default")


def _team(kubectl: Kubectl, namespace: str, webhook: RunningWebhook, editor_role: str) -> None:
    """alice and bob edit runtimes here, bob's group may get the key, and the webhook
    reviews the namespace."""
    for user in ("alice", "bob"):
        kubectl(
            "create", "rolebinding", f"{user}-runtimes", f"--clusterrole={editor_role}",
            f"--user={user}", "-n", namespace,
        )  # fmt: skip
    kubectl(
        "create", "role", "read-key", "--verb=get", "--resource=secrets",
        f"--resource-name={KEY_SECRET}", "-n", namespace,
    )  # fmt: skip
    kubectl(
        "create", "rolebinding", "read-key", "--role=read-key", f"--group={READERS}",
        "-n", namespace,
    )  # fmt: skip
    kubectl(
        "create", "secret", "generic", KEY_SECRET, "--from-literal=api-key=sk-not-for-alice",
        "-n", namespace,
    )  # fmt: skip
    _select(kubectl, namespace, webhook)
    probe = _runtime("probe", podMetadata={"labels": {"app.kubernetes.io/name": "x"}})
    wait_for(
        lambda: (
            kubectl(
                "apply", "--dry-run=server", "-n", namespace, "-f", "-", input=probe, check=False
            ).returncode
            != 0
        ),
        "the webhook to review requests in the labelled namespace",
        EVENTUALLY_SECONDS,
    )


def _as(kubectl: Kubectl, user: str, namespace: str, *args: str, body: str | None = None) -> Any:
    groups = [f"--as-group={READERS}"] if user == "bob" else []
    return kubectl("--as", user, *groups, "-n", namespace, *args, input=body, check=False)


def _patch(kubectl: Kubectl, user: str, namespace: str, name: str, spec: dict[str, Any]) -> Any:
    patch = json.dumps({"spec": spec})
    return _as(kubectl, user, namespace, "patch", PLURAL, name, "--type=merge", "-p", patch)


def _refused_for_alice(answer: Any, namespace: str, field: str) -> None:
    assert answer.returncode != 0
    assert (
        f'{field}: user "alice" may not get Secret "{namespace}/{KEY_SECRET}"; '
        "referencing a Secret needs the right to read it"
    ) in answer.stderr, answer.stderr


def test_an_editor_may_reference_only_secrets_they_may_read(
    kubectl: Kubectl, namespace: str, checking: RunningWebhook, editor_role: str
) -> None:
    _team(kubectl, namespace, checking, editor_role)
    runtime = _runtime(
        "chat", provider={"type": "openai", "model": "m", "credentialsSecretRef": KEY}
    )

    refused = _as(kubectl, "alice", namespace, "create", "-f", "-", body=runtime)
    _refused_for_alice(refused, namespace, "spec.provider.credentialsSecretRef.name")
    assert kubectl("get", PLURAL, "-n", namespace, "-o", "name").stdout == ""

    admitted = _as(kubectl, "bob", namespace, "create", "-f", "-", body=runtime)
    assert admitted.returncode == 0, admitted.stderr

    # Running it on needs no Secret right: the key and where it goes stay as they are.
    image = {"image": {"repository": "ghcr.io/trussiumhq/trussium", "tag": "1.5.0"}}
    rolled = _patch(kubectl, "alice", namespace, "chat", image | {"replicas": 2})
    assert rolled.returncode == 0, rolled.stderr

    # Sending the key elsewhere does.
    elsewhere = {"provider": {"baseURL": COLLECTOR}}
    refused = _patch(kubectl, "alice", namespace, "chat", elsewhere)
    _refused_for_alice(refused, namespace, "spec.provider.credentialsSecretRef.name")
    moved = _patch(kubectl, "bob", namespace, "chat", elsewhere)
    assert moved.returncode == 0, moved.stderr

    # So does a new reference of another kind.
    pull = _patch(kubectl, "alice", namespace, "chat", {"imagePullSecrets": [{"name": KEY_SECRET}]})
    _refused_for_alice(pull, namespace, "spec.imagePullSecrets[0].name")

    stored = json.loads(kubectl("get", PLURAL, "chat", "-n", namespace, "-o", "json").stdout)
    assert stored["spec"]["provider"]["baseURL"] == COLLECTOR
    assert stored["spec"]["image"]["tag"] == "1.5.0"
    assert "imagePullSecrets" not in stored["spec"]


def test_switched_off_an_editor_may_reference_any_secret(
    kubectl: Kubectl, namespace: str, unchecked: RunningWebhook, editor_role: str
) -> None:
    _team(kubectl, namespace, unchecked, editor_role)
    runtime = _runtime(
        "chat",
        provider={
            "type": "openai",
            "model": "m",
            "credentialsSecretRef": KEY,
            "baseURL": COLLECTOR,
        },
    )
    admitted = _as(kubectl, "alice", namespace, "create", "-f", "-", body=runtime)
    assert admitted.returncode == 0, admitted.stderr


def test_a_reference_that_cannot_be_checked_is_refused(
    kubectl: Kubectl, namespace: str, unanswered: RunningWebhook, editor_role: str
) -> None:
    _team(kubectl, namespace, unanswered, editor_role)
    runtime = _runtime(
        "chat", provider={"type": "openai", "model": "m", "credentialsSecretRef": KEY}
    )
    refused = _as(kubectl, "bob", namespace, "create", "-f", "-", body=runtime)
    assert refused.returncode != 0
    assert "Error from server (ServiceUnavailable)" in refused.stderr, refused.stderr
    assert (
        f'cannot check whether user "bob" may get Secret "{namespace}/{KEY_SECRET}": '
        "the access review failed or timed out"
    ) in refused.stderr
    assert kubectl("get", PLURAL, "-n", namespace, "-o", "name").stdout == ""
    logged = [json.loads(line) for line in unanswered.log.read_text().splitlines()]
    failures = [e for e in logged if e.get("msg", "").startswith("cannot review access")]
    assert failures, "the failure is logged"
    assert failures[-1]["error"] == "ApiException 403"
    assert failures[-1]["secret"] == KEY_SECRET
