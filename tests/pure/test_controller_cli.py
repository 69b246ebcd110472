"""`trussium-controller run` flags, their TRUSSIUM_* environment variables and defaults."""

import subprocess
import sys
from pathlib import Path

import pytest

from trussium_operator.controller.cli import limiter_from, main, options_from, parser
from trussium_operator.controller.migration.exclusion import LeaseSearch
from trussium_operator.serving.secure_metrics import MetricsOptions


def test_defaults_match_adr_0001(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POD_NAME", "operator-0")
    monkeypatch.delenv("POD_NAMESPACE", raising=False)
    options = options_from(parser().parse_args(["run"]))
    assert options.watch_namespace is None
    assert options.workers == 4
    assert options.leader_elect is True
    assert options.leader_election_id == "trussium-operator"
    assert (options.timing.lease_duration, options.timing.renew_deadline) == (15.0, 10.0)
    assert options.timing.retry_period == 2.0
    assert options.metrics == MetricsOptions("0.0.0.0:8443", secure=True, cert_path=None)
    assert options.health_address == "0.0.0.0:8081"
    assert options.identity == "operator-0"


def test_environment_sets_flags_and_an_explicit_flag_wins(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TRUSSIUM_WATCH_NAMESPACE", "team-a")
    monkeypatch.setenv("TRUSSIUM_WORKERS", "8")
    monkeypatch.setenv("TRUSSIUM_LEADER_ELECT", "false")
    monkeypatch.setenv("POD_NAMESPACE", "operators")
    options = options_from(parser().parse_args(["run", "--workers", "2"]))
    assert options.watch_namespace == "team-a"
    assert options.workers == 2
    assert options.leader_elect is False
    assert options.leader_election_namespace == "operators"


def test_inconsistent_leader_timing_is_a_one_line_error_exit_2(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["run", "--renew-deadline", "20"]) == 2
    assert capsys.readouterr().err == (
        "trussium-controller: error: need 0 < --retry-period < --renew-deadline < "
        "--lease-duration\n"
    )


@pytest.mark.parametrize(
    ("flags", "secure"),
    [
        (["--metrics-secure=false"], False),  # the Go operator's spelling
        (["--metrics-secure=false", "--metrics-secure"], True),
        (["--metrics-secure", "off"], False),
        ([], True),
    ],
)
def test_metrics_secure_takes_the_go_operators_spellings(flags: list[str], secure: bool) -> None:
    options = options_from(parser().parse_args(["run", *flags]))
    assert options.metrics.secure is secure


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--metrics-cert-path", "/nonexistent"], "--metrics-cert-path /nonexistent: not a folder"),
        (["--metrics-cert-path", ".", "--metrics-secure=false"], "needs --metrics-secure"),
        (["--metrics-bind-address", "8443"], "--metrics-bind-address: expected HOST:PORT"),
    ],
)
def test_metrics_flags_that_cannot_be_served_are_one_line_errors(
    flags: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", *flags]) == 2
    assert message in capsys.readouterr().err


def test_render_subcommand_prints_the_managed_objects(
    capsys: pytest.CaptureFixture[str],
) -> None:
    sample = sorted(Path(__file__).parents[1].joinpath("samples", "valid").glob("*.yaml"))[0]
    assert main(["render", "-f", str(sample)]) == 0
    assert "kind: Deployment" in capsys.readouterr().out


def test_render_into_a_reader_that_stops_early_exits_cleanly() -> None:
    """`trussium-controller render -f - | head -1` must not end in a traceback.

    Enough runtimes that the output overflows the pipe buffer, so the write
    really hits the closed pipe.
    """
    script = Path(sys.executable).parent / "trussium-controller"
    example = (Path(__file__).resolve().parents[2] / "examples" / "runtime.yaml").read_text()
    manifests = "---\n".join(
        example.replace("name: assistant", f"name: assistant-{i}") for i in range(200)
    )
    render = subprocess.Popen(
        [str(script), "render", "-f", "-"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert render.stdin is not None
    assert render.stdout is not None
    assert render.stderr is not None
    render.stdin.write(manifests.encode())
    render.stdin.close()
    assert render.stdout.readline() == b"apiVersion: v1\n"
    render.stdout.close()
    errors = render.stderr.read().decode()
    assert render.wait(timeout=60) == 0, errors
    assert "Traceback" not in errors


def test_go_operator_migration_defaults_and_their_switches(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    options = options_from(parser().parse_args(["run"]))
    assert options.legacy_field_managers == frozenset({"manager"})
    assert options.exclusion_lease == LeaseSearch("d4fd4c09.trussium.io", ""), "every namespace"
    pinned = ["run", "--go-operator-lease-namespace=platform-ops"]
    assert options_from(parser().parse_args(pinned)).exclusion_lease == LeaseSearch(
        "d4fd4c09.trussium.io", "platform-ops"
    )
    monkeypatch.setenv("TRUSSIUM_GO_OPERATOR_EXCLUSION", "false")
    args = ["run", "--legacy-field-managers", "manager, helm,", "--go-operator-lease-namespace=x"]
    options = options_from(parser().parse_args(args))
    assert options.legacy_field_managers == frozenset({"manager", "helm"})
    assert options.exclusion_lease is None
    options = options_from(parser().parse_args(["run", "--legacy-field-managers="]))
    assert options.legacy_field_managers == frozenset()


def test_secret_references_are_checked_unless_turned_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert options_from(parser().parse_args(["run"])).check_secret_references
    off = parser().parse_args(["run", "--no-check-secret-references"])
    assert not options_from(off).check_secret_references
    monkeypatch.setenv("TRUSSIUM_CHECK_SECRET_REFERENCES", "false")
    assert not options_from(parser().parse_args(["run"])).check_secret_references


def test_no_client_rate_limit_by_default_and_one_when_a_rate_is_given(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert limiter_from(parser().parse_args(["run"])) is None
    limiter = limiter_from(parser().parse_args(["run", "--kube-api-qps", "20"]))
    assert limiter is not None
    assert (limiter.qps, limiter.burst) == (20.0, 30)
    monkeypatch.setenv("TRUSSIUM_KUBE_API_QPS", "50")
    monkeypatch.setenv("TRUSSIUM_KUBE_API_BURST", "100")
    limiter = limiter_from(parser().parse_args(["run"]))
    assert limiter is not None
    assert (limiter.qps, limiter.burst) == (50.0, 100)
    assert limiter_from(parser().parse_args(["run", "--kube-api-qps", "0"])) is None


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--kube-api-qps", "-1"], "--kube-api-qps must be 0 (no limit) or more"),
        (["--kube-api-burst", "0"], "--kube-api-burst must be at least 1"),
    ],
)
def test_an_unusable_client_rate_limit_is_a_one_line_error_exit_2(
    flags: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", *flags]) == 2
    assert capsys.readouterr().err == f"trussium-controller: error: {message}\n"
