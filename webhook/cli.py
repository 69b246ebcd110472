"""`trussium-webhook`: serve admission reviews, validate manifests offline, manage certificates.

Every `serve` flag can also be set through `TRUSSIUM_<FLAG_IN_UPPER_SNAKE>`
(repeatable flags: comma-separated), so the chart configures it either way;
`serve --help` lists the variables.
Exit codes: 0 success, 1 failure (invalid manifests, server error), 2 usage
or configuration error (one line on stderr, no traceback).
"""

import argparse
import functools
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import cast

from trussium_operator.cmdline.options import (
    LOG_FORMATS,
    LOG_LEVELS,
    ArgumentParser,
    ConfigurationError,
    Subcommands,
    add_flag,
    add_version,
    env_bool,
    fail,
    list_environment,
)
from trussium_operator.offline.validate import add_validate_command
from trussium_operator.serving.addresses import split_address
from trussium_operator.serving.limits import (
    DEFAULT_BODY_TIMEOUT_SECONDS,
    DEFAULT_BUDGET_WAIT_SECONDS,
    DEFAULT_LIMITS,
    DEFAULT_MAX_REQUEST_BYTES,
    DEFAULT_MEMORY_BUDGET_BYTES,
    SMALL_REQUEST_BYTES,
    ConnectionLimits,
)
from trussium_operator.serving.secure_metrics import add_metrics_flags, metrics_options
from trussium_operator.webhook.certs_cli import add_certs_commands

PROGRAM = "trussium-webhook"

log = logging.getLogger(__name__)


def _add_serve_command(subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    serve_parser = subparsers.add_parser("serve", help="serve admission reviews over HTTPS")
    add = functools.partial(add_flag, serve_parser)
    add("--bind-address", default="0.0.0.0:9443", help="HTTPS HOST:PORT")
    add(
        "--health-bind-address",
        default="0.0.0.0:8081",
        help="plain-HTTP HOST:PORT for /healthz and /readyz",
    )
    add_metrics_flags(serve_parser)
    add(
        "--cert-dir",
        type=Path,
        default="/run/trussium/certs",
        help="folder with tls.crt and tls.key (the mounted serving Secret), reloaded on change",
    )
    add(
        "--operator-username",
        default=None,
        help="user name of the operator's ServiceAccount, the only one allowed to change "
        "managed Deployments (e.g. system:serviceaccount:trussium-system:trussium-operator)",
    )
    add("--kubeconfig", default=None)
    add("--log-level", choices=LOG_LEVELS, default="info")
    add(
        "--log-format",
        choices=LOG_FORMATS,
        default="json",
        help="json: one object per line, for log pipelines; text: for a person at a terminal",
    )
    add(
        "--max-request-bytes",
        type=int,
        default=str(DEFAULT_MAX_REQUEST_BYTES),
        help="largest request body (after inflation) read; larger ones are answered 413. "
        "The default fits the largest review the API server can send with etcd's limits",
    )
    add(
        "--memory-budget-bytes",
        type=int,
        default=str(DEFAULT_MEMORY_BUDGET_BYTES),
        help="bytes all admissions may hold at once, estimated from their request bodies "
        f"decoded (four per body byte beyond each one's first {SMALL_REQUEST_BYTES // 1024} "
        "KiB while it is read); a request that cannot get its share within --budget-wait "
        "seconds is answered 429, one estimated past all of it 413",
    )
    add(
        "--budget-wait",
        type=float,
        default=str(DEFAULT_BUDGET_WAIT_SECONDS),
        help="seconds a request waits for the memory budget before a 429",
    )
    add(
        "--header-timeout",
        type=float,
        default=str(DEFAULT_LIMITS.header_timeout),
        help="seconds a connection gets for each complete request head; also how long an "
        "idle keep-alive connection stays open",
    )
    add(
        "--handshake-timeout",
        type=float,
        default=str(DEFAULT_LIMITS.handshake_timeout),
        help="seconds a new connection gets for its first byte, and then for its TLS handshake",
    )
    add(
        "--body-timeout",
        type=float,
        default=str(DEFAULT_BODY_TIMEOUT_SECONDS),
        help="seconds a request body gets to arrive in full",
    )
    add(
        "--max-connections",
        type=int,
        default=str(DEFAULT_LIMITS.max_connections),
        help="open connections per listener, counted from accept; at the cap a new one "
        "closes the connection idle longest (else the request in flight longest)",
    )
    serve_parser.add_argument(
        "--secret-lookup",
        action=argparse.BooleanOptionalAction,
        default=env_bool("--secret-lookup", False),
        help="warn when a runtime references a Secret that does not exist yet (needs RBAC to "
        "list Secrets in the served namespaces; the controller reports it in status anyway)",
    )
    serve_parser.add_argument(
        "--authorize-secret-references",
        action=argparse.BooleanOptionalAction,
        default=env_bool("--authorize-secret-references", True),
        help="refuse a runtime that references a Secret its requester may not get, on "
        "create and when a reference or the provider's baseURL changes (a "
        "SubjectAccessReview each; needs `create subjectaccessreviews`)",
    )
    add(
        "--shutdown-delay",
        type=float,
        default="5",
        help="seconds admissions are still answered after SIGTERM, while endpoints update",
    )
    add(
        "--shutdown-timeout",
        type=float,
        default="20",
        help="seconds in-flight admissions get to finish after SIGTERM",
    )
    serve_parser.set_defaults(handler=_serve)
    list_environment(serve_parser)


def _serve(args: argparse.Namespace) -> int:
    # Imported here so that `validate`, which runs in users' CI, starts without
    # loading the Kubernetes client and the server machinery; the client's
    # generated classes only when used (docs/adr/0048).
    import asyncio

    from prometheus_client import disable_created_metrics

    from trussium_operator.cmdline import lazy_kubernetes
    from trussium_operator.cmdline.logs import configure_logging

    lazy_kubernetes.install()
    from trussium_operator.webhook import server

    configure_logging(args.log_level, args.log_format)
    # Series as controller-runtime exposes them: no `_created` companion per counter.
    disable_created_metrics()  # type: ignore[no-untyped-call]
    if not args.operator_username:
        return fail(PROGRAM, "--operator-username is required")
    try:
        for address in (args.bind_address, args.health_bind_address):
            split_address(address)
        metrics = metrics_options(args)
    except (ValueError, ConfigurationError) as error:
        return fail(PROGRAM, error)
    if args.max_connections < 1:
        return fail(PROGRAM, "--max-connections must be at least 1")
    if not Path(args.cert_dir).is_dir():
        return fail(PROGRAM, f"--cert-dir {args.cert_dir}: not a folder")
    options = server.ServeOptions(
        operator_username=args.operator_username,
        bind_address=args.bind_address,
        health_bind_address=args.health_bind_address,
        metrics=metrics,
        cert_dir=Path(args.cert_dir),
        kubeconfig=args.kubeconfig,
        max_request_bytes=args.max_request_bytes,
        memory_budget_bytes=args.memory_budget_bytes,
        budget_wait=args.budget_wait,
        limits=ConnectionLimits(
            header_timeout=args.header_timeout,
            handshake_timeout=args.handshake_timeout,
            max_connections=args.max_connections,
        ),
        body_timeout=args.body_timeout,
        secret_lookup=args.secret_lookup,
        authorize_secret_references=args.authorize_secret_references,
        shutdown_delay=args.shutdown_delay,
        shutdown_timeout=args.shutdown_timeout,
    )
    try:
        asyncio.run(server.serve(options))
    except ConfigurationError as error:
        return fail(PROGRAM, error)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(prog=PROGRAM, description="The TrussiumRuntime admission webhook.")
    add_version(parser)
    # Subcommands are of the root's class, so their usage errors are one line too.
    commands = cast(Subcommands, parser.add_subparsers(dest="command", required=True))
    _add_serve_command(commands)
    add_validate_command(commands)
    add_certs_commands(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
    except ConfigurationError as error:  # a TRUSSIUM_* variable the flags cannot take
        return fail(PROGRAM, error)
    code: int = args.handler(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
