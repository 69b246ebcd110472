"""`trussium-controller run` and `trussium-controller render -f PATH`.

Every `run` flag also reads `TRUSSIUM_<FLAG_IN_UPPER_SNAKE>` from the
environment (ADR 0001), so the chart can configure it either way; an
explicit flag wins, and `run --help` lists the variables. A configuration
the controller cannot start with (bad flags or variables, an unusable
kubeconfig) is one line on stderr and exit code 2, never a traceback.
"""

import argparse
import asyncio
import logging
import os
import socket
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import cast

import uvloop
from prometheus_client import disable_created_metrics

from trussium_operator.cmdline.kubeconfig import new_api_client
from trussium_operator.cmdline.logs import configure_logging
from trussium_operator.cmdline.options import (
    LOG_FORMATS,
    LOG_LEVELS,
    ArgumentParser,
    ConfigurationError,
    Subcommands,
    add_flag,
    add_version,
    env_bool,
    env_list,
    fail,
    list_environment,
    package_version,
)
from trussium_operator.cmdline.stopping import stop_on_signals
from trussium_operator.common import constants as c
from trussium_operator.common.managed_fields import GO_OPERATOR_MANAGER
from trussium_operator.controller.machinery.kube import Kube
from trussium_operator.controller.machinery.leader import Timing
from trussium_operator.controller.machinery.tokenbucket import TokenBucket
from trussium_operator.controller.manager import Manager, Options
from trussium_operator.controller.migration.exclusion import GO_OPERATOR_LEASE_NAME, LeaseSearch
from trussium_operator.controller.webhook_certificates import WebhookCertificates
from trussium_operator.offline.render import add_render_arguments, run_render
from trussium_operator.serving.addresses import DISABLED, split_address
from trussium_operator.serving.secure_metrics import add_metrics_flags, metrics_options

log = logging.getLogger("controller")
PROGRAM = "trussium-controller"
# No client-side limit by default: the API server's priority and fairness protects it,
# as SIG API Machinery advises and controller-runtime does since v0.21 (ADR 0016).
KUBE_API_QPS = 0.0
# Used only with a --kube-api-qps above 0.
KUBE_API_BURST = 30
IN_CLUSTER_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


def user_agent(identity: str) -> str:
    """Distinct, so audit logs and apiserver_request_total can single out the controller;
    the identity (the pod's name) tells the audit log which replica wrote."""
    return f"{c.FIELD_MANAGER}/{package_version()} ({identity})"


def _default_namespace() -> str:
    if os.environ.get("POD_NAMESPACE"):
        return os.environ["POD_NAMESPACE"]
    if IN_CLUSTER_NAMESPACE.exists():
        return IN_CLUSTER_NAMESPACE.read_text().strip()
    return "default"


def _run_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    run = sub.add_parser(
        "run",
        help="reconcile TrussiumRuntimes until stopped",
    )
    flags: list[tuple[str, dict[str, object]]] = [
        ("--kubeconfig", {"default": None, "help": "else in-cluster, else KUBECONFIG"}),
        ("--watch-namespace", {"default": "", "help": "watch only this namespace (empty: all)"}),
        ("--workers", {"type": int, "default": 4}),
        (
            "--kube-api-qps",
            {
                "type": float,
                "default": KUBE_API_QPS,
                "help": "requests a second to the API server, on average; 0: no client-side limit",
            },
        ),
        (
            "--kube-api-burst",
            {
                "type": int,
                "default": KUBE_API_BURST,
                "help": "requests at once above the rate (with --kube-api-qps above 0)",
            },
        ),
        ("--leader-election-id", {"default": c.FIELD_MANAGER, "help": "Lease name"}),
        ("--leader-election-namespace", {"default": None, "help": "default: the pod's"}),
        ("--lease-duration", {"type": float, "default": 15.0}),
        ("--renew-deadline", {"type": float, "default": 10.0}),
        ("--retry-period", {"type": float, "default": 2.0}),
        ("--health-probe-bind-address", {"default": "0.0.0.0:8081", "help": '"0" disables'}),
        ("--log-level", {"default": "info", "choices": LOG_LEVELS}),
        ("--log-format", {"default": "json", "choices": LOG_FORMATS, "help": "json or text"}),
        ("--identity", {"default": None, "help": "default: POD_NAME, else the host name"}),
        (
            "--legacy-field-managers",
            {
                "default": GO_OPERATOR_MANAGER,
                "help": "comma-separated field managers whose Update-owned fields are taken "
                "over, so fields no longer rendered get pruned (default: the Go operator's)",
            },
        ),
        (
            "--go-operator-lease-name",
            {"default": GO_OPERATOR_LEASE_NAME, "help": "the Go operator's leader Lease"},
        ),
        (
            "--go-operator-lease-namespace",
            {
                "default": "",
                "help": "look for that Lease only in this namespace (empty: in every namespace)",
            },
        ),
    ]
    for flag, options in flags:
        add_flag(run, flag, **options)
    add_metrics_flags(run)
    run.add_argument(
        "--leader-elect",
        action=argparse.BooleanOptionalAction,
        default=env_bool("--leader-elect", True),
        help="only the Lease holder reconciles (default: on)",
    )
    run.add_argument(
        "--webhook-certificates",
        action=argparse.BooleanOptionalAction,
        default=env_bool("--webhook-certificates", False),
        help="create, renew and inject the webhook's CA and serving certificate "
        "(the chart's selfManaged mode; default: off)",
    )
    for flag, default, help_text in (
        ("--webhook-namespace", None, "where the webhook runs (default: the pod's)"),
        ("--webhook-secret-name", c.WEBHOOK_SECRET_NAME, "the serving Secret the webhook mounts"),
        ("--webhook-ca-secret-name", c.WEBHOOK_CA_SECRET_NAME, "the CA and its key"),
        ("--webhook-service-name", c.WEBHOOK_SERVICE_NAME, "names the certificate is valid for"),
    ):
        add_flag(run, flag, default=default, help=help_text)
    for flag, help_text in (
        (
            "--webhook-config-name",
            f"configurations to inject into (default {c.WEBHOOK_CONFIG_NAME})",
        ),
        ("--webhook-dns-name", "extra certificate DNS name"),
        ("--webhook-ip-address", "extra certificate IP address"),
    ):
        run.add_argument(flag, action="append", help=f"{help_text} (repeatable)")
    run.add_argument(
        "--go-operator-exclusion",
        action=argparse.BooleanOptionalAction,
        default=env_bool("--go-operator-exclusion", True),
        help="do not reconcile while the Go operator's leader Lease is held (default: on)",
    )
    run.add_argument(
        "--check-secret-references",
        action=argparse.BooleanOptionalAction,
        default=env_bool("--check-secret-references", True),
        help="check that referenced Secrets exist (list and watch Secret metadata); "
        "off for an install without Secret rights (default: on)",
    )
    list_environment(run)


def parser() -> argparse.ArgumentParser:
    root = ArgumentParser(prog=PROGRAM)
    add_version(root)
    # Subcommands are of the root's class, so their usage errors are one line too.
    sub = cast(Subcommands, root.add_subparsers(dest="command", required=True))
    _run_parser(sub)
    add_render_arguments(
        sub.add_parser("render", help="print the objects a TrussiumRuntime manifest yields")
    )
    return root


def options_from(args: argparse.Namespace) -> Options:
    timing = Timing(
        lease_duration=float(args.lease_duration),
        renew_deadline=float(args.renew_deadline),
        retry_period=float(args.retry_period),
    )
    if not 0 < timing.retry_period < timing.renew_deadline < timing.lease_duration:
        raise ConfigurationError("need 0 < --retry-period < --renew-deadline < --lease-duration")
    if int(args.workers) < 1:
        raise ConfigurationError("--workers must be at least 1")
    if args.health_probe_bind_address != DISABLED:
        try:
            split_address(args.health_probe_bind_address)
        except ValueError as error:
            raise ConfigurationError(error) from None
    return Options(
        watch_namespace=args.watch_namespace or None,
        workers=int(args.workers),
        leader_elect=bool(args.leader_elect),
        leader_election_id=args.leader_election_id,
        leader_election_namespace=args.leader_election_namespace or _default_namespace(),
        timing=timing,
        metrics=metrics_options(args),
        health_address=args.health_probe_bind_address,
        identity=args.identity or os.environ.get("POD_NAME") or socket.gethostname(),
        legacy_field_managers=frozenset(
            name.strip() for name in str(args.legacy_field_managers).split(",") if name.strip()
        ),
        exclusion_lease=(
            LeaseSearch(args.go_operator_lease_name, args.go_operator_lease_namespace)
            if args.go_operator_exclusion
            else None
        ),
        check_secret_references=bool(args.check_secret_references),
        webhook_certificates=webhook_certificates_from(args),
    )


def webhook_certificates_from(args: argparse.Namespace) -> WebhookCertificates | None:
    if not args.webhook_certificates:
        return None
    return WebhookCertificates(
        namespace=args.webhook_namespace or _default_namespace(),
        secret_name=args.webhook_secret_name,
        ca_secret_name=args.webhook_ca_secret_name,
        service_name=args.webhook_service_name,
        config_names=tuple(
            args.webhook_config_name or env_list("--webhook-config-name", [c.WEBHOOK_CONFIG_NAME])
        ),
        extra_dns_names=tuple(args.webhook_dns_name or env_list("--webhook-dns-name")),
        ip_addresses=tuple(args.webhook_ip_address or env_list("--webhook-ip-address")),
    )


def limiter_from(args: argparse.Namespace) -> TokenBucket | None:
    """The client-side bound on requests; None when `--kube-api-qps` is 0."""
    qps, burst = float(args.kube_api_qps), int(args.kube_api_burst)
    if qps < 0:
        raise ConfigurationError("--kube-api-qps must be 0 (no limit) or more")
    if burst < 1:
        raise ConfigurationError("--kube-api-burst must be at least 1")
    return TokenBucket(qps, burst) if qps else None


async def run(args: argparse.Namespace) -> int:
    options = options_from(args)
    limiter = limiter_from(args)
    api = await new_api_client(args.kubeconfig)
    api.user_agent = user_agent(options.identity)
    kube = Kube(api, limiter)
    stop = stop_on_signals()
    log.info(
        "starting",
        extra={
            "fields": {
                "identity": options.identity,
                "watchNamespace": options.watch_namespace or "",
                "kubeApiQPS": limiter.qps if limiter else 0,
                "kubeApiBurst": limiter.burst if limiter else 0,
                "leaderElect": options.leader_elect,
                "legacyFieldManagers": sorted(options.legacy_field_managers),
                "goOperatorLease": str(options.exclusion_lease or ""),
                "checkSecretReferences": options.check_secret_references,
            }
        },
    )
    try:
        return await Manager(kube, options).run(stop)
    finally:
        await kube.api.close()


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = parser().parse_args(argv)
        if args.command == "render":
            return _render(args)
        configure_logging(args.log_level, args.log_format)
        # Series as controller-runtime exposes them: no `_created` companion per counter.
        disable_created_metrics()  # type: ignore[no-untyped-call]
        # uvloop: its event loop and TLS cost the controller about an eighth less CPU per
        # runtime than asyncio's own, for the same requests (docs/adr/0055).
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            return runner.run(run(args))
    except ConfigurationError as error:
        return fail(PROGRAM, error)


def _render(args: argparse.Namespace) -> int:
    try:
        return run_render(args.filename, args.output, sys.stdout, sys.stderr, sys.stdin)
    except BrokenPipeError:
        # The reader (`| head`) stopped early: not an error, and no traceback at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
