"""Both programs serve /metrics as the Go operator does: HTTPS, and only to a bearer
token the API server authenticates (TokenReview) and allows `get` on /metrics
(SubjectAccessReview), each running with the chart's RBAC and nothing more;
plain HTTP only when asked for."""

import http.client
import secrets

import pytest

from devcluster import ControlPlane
from devcluster.hostoperator import HOST, HostOperator, get_metrics, install_crds
from devcluster.polling import wait_for

# A series each program exposes from its start, whatever it has done since.
ALWAYS = {
    "controller": "controller_runtime_max_concurrent_reconciles",
    "webhook": "trussium_webhook_certificate_expiry_timestamp_seconds",
}


def _ports(operator: HostOperator) -> dict[str, int]:
    return {
        "controller": operator.controller_metrics_port,
        "webhook": operator.webhook_metrics_port,
    }


@pytest.mark.api
def test_metrics_need_a_token_allowed_to_get_them(plane: ControlPlane, namespace: str) -> None:
    install_crds(plane)
    release = f"trussium-operator-{secrets.token_hex(3)}"
    operator = HostOperator(plane, namespace=release, release=release, watch_namespace=namespace)
    stranger = f"{release}-stranger"
    try:
        with operator:
            plane.kubectl("create", "serviceaccount", stranger, "-n", release)
            reader_token = operator.token(operator.metrics_reader)
            stranger_token = operator.token(stranger)
            for program, port in _ports(operator).items():
                url = f"https://{HOST}:{port}/metrics"
                assert get_metrics(url, None)[0] == 401, program
                assert get_metrics(url, "not-a-token")[0] == 401, program
                status, text = get_metrics(url, stranger_token)
                assert status == 403, program
                assert f"system:serviceaccount:{release}:{stranger}" in text
                status, text = get_metrics(url, reader_token)
                assert status == 200, (program, text[:200])
                assert f"\n{ALWAYS[program]}" in text, program
                with pytest.raises((OSError, http.client.HTTPException)):
                    get_metrics(f"http://{HOST}:{port}/metrics", reader_token)

            # Without the right to create the reviews, a new token gets a 503, and each
            # program says why (a known one is answered from the cache meanwhile).
            plane.kubectl("delete", "clusterrolebinding", f"{release}-access-reviews")
            for program, port in _ports(operator).items():

                def unavailable(url: str = f"https://{HOST}:{port}/metrics") -> bool:
                    return get_metrics(url, operator.token(stranger))[0] == 503

                wait_for(unavailable, f"the {program} to answer 503 without its permission", 30)
                assert "metrics access review refused: 403 Forbidden" in (
                    operator.logs[program].read_text()
                )
            logs = "".join(path.read_text(errors="replace") for path in operator.logs.values())
    finally:
        plane.kubectl("delete", "--ignore-not-found", "-f", "-", input=operator.render_wiring())
    assert reader_token not in logs
    assert stranger_token not in logs
    assert "eyJ" not in logs, "no token (a JWT) of any kind is logged"


@pytest.mark.api
def test_plain_http_metrics_when_asked_for(plane: ControlPlane, namespace: str) -> None:
    install_crds(plane)
    release = f"trussium-operator-{secrets.token_hex(3)}"
    operator = HostOperator(
        plane, namespace=release, release=release, watch_namespace=namespace, metrics_secure=False
    )
    try:
        with operator:
            for program, port in _ports(operator).items():
                status, text = get_metrics(f"http://{HOST}:{port}/metrics", None)
                assert status == 200, program
                assert f"\n{ALWAYS[program]}" in text, program
    finally:
        plane.kubectl("delete", "--ignore-not-found", "-f", "-", input=operator.render_wiring())
