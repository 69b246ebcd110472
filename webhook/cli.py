"""`trussium-webhook`: serve admission reviews, validate manifests offline, manage certificates.

Every `serve` flag can also be set through `TRUSSIUM_<FLAG_IN_UPPER_SNAKE>`
(repeatable flags: comma-separated), so the chart configures it either way.
Exit codes: 0 success, 1 failure (invalid manifests, server error), 2 usage.
"""

import argparse
import asyncio
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from certs.cli import add_certs_commands
from common.constants import WEBHOOK_CONFIG_NAME, WEBHOOK_SECRET_NAME, WEBHOOK_SERVICE_NAME
from common.logs import configure_json_logging
from webhook.app import DEFAULT_BODY_TIMEOUT_SECONDS, DEFAULT_MAX_REQUEST_BYTES
from webhook.connections import DEFAULT_LIMITS, ConnectionLimits
from webhook.offline import add_validate_command

LOG_LEVELS = ("debug", "info", "warning", "error")

log = logging.getLogger(__name__)


def _env(flag: str, default: str | None = None) -> str | None:
    return os.environ.get("TRUSSIUM_" + flag.upper().replace("-", "_"), default)


def _env_list(flag: str, default: Sequence[str] = ()) -> list[str]:
    value = _env(flag)
    return [item.strip() for item in value.split(",") if item.strip()] if value else list(default)


def _add_serve_command(subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    serve_parser = subparsers.add_parser("serve", help="serve admission reviews over HTTPS")
    add = serve_parser.add_argument
    add("--bind-address", default=_env("bind-address", "0.0.0.0:9443"), help="HTTPS HOST:PORT")
    add(
        "--health-bind-address",
        default=_env("health-bind-address", "0.0.0.0:8081"),
        help="plain-HTTP HOST:PORT for /healthz, /readyz and /metrics",
    )
    add(
        "--cert-mode",
        choices=("self-managed", "files"),
        default=_env("cert-mode", "self-managed"),
        help="self-managed: CA and certificate kept in a Secret; files: served from --cert-dir",
    )
    add("--cert-dir", type=Path, default=_env("cert-dir"), help="folder with tls.crt and tls.key")
    add("--namespace", default=_env("namespace", os.environ.get("POD_NAMESPACE", "")))
    add("--secret-name", default=_env("secret-name", WEBHOOK_SECRET_NAME))
    add("--service-name", default=_env("service-name", WEBHOOK_SERVICE_NAME))
    add("--dns-name", action="append", help="extra certificate DNS name (repeatable)")
    add("--ip-address", action="append", help="extra certificate IP address (repeatable)")
    add(
        "--webhook-config-name",
        action="append",
        help=f"webhook configurations to inject the CA into (default {WEBHOOK_CONFIG_NAME})",
    )
    add(
        "--operator-username",
        default=_env("operator-username"),
        help="user name of the operator's ServiceAccount, the only one allowed to change "
        "managed Deployments (e.g. system:serviceaccount:trussium-system:trussium-operator)",
    )
    add("--kubeconfig", default=_env("kubeconfig"))
    add("--log-level", choices=LOG_LEVELS, default=_env("log-level", "info"))
    add(
        "--max-request-bytes",
        type=int,
        default=int(_env("max-request-bytes") or DEFAULT_MAX_REQUEST_BYTES),
    )
    add(
        "--header-timeout",
        type=float,
        default=float(_env("header-timeout") or DEFAULT_LIMITS.header_timeout),
        help="seconds a connection gets for its TLS handshake and for each complete request "
        "head; also how long an idle keep-alive connection stays open",
    )
    add(
        "--body-timeout",
        type=float,
        default=float(_env("body-timeout") or DEFAULT_BODY_TIMEOUT_SECONDS),
        help="seconds a request body gets to arrive in full",
    )
    add(
        "--max-connections",
        type=int,
        default=int(_env("max-connections") or DEFAULT_LIMITS.max_connections),
        help="open connections per listener; more are closed on arrival",
    )
    add(
        "--secret-lookup",
        action="store_true",
        default=_env("secret-lookup", "false") == "true",
        help="warn when a runtime references a Secret that does not exist yet (needs RBAC to "
        "list Secrets in the served namespaces; the controller reports it in status anyway)",
    )
    add(
        "--shutdown-delay",
        type=float,
        default=float(_env("shutdown-delay") or 5.0),
        help="seconds admissions are still answered after SIGTERM, while endpoints update",
    )
    add(
        "--shutdown-timeout",
        type=float,
        default=float(_env("shutdown-timeout") or 20.0),
        help="seconds in-flight admissions get to finish after SIGTERM",
    )
    serve_parser.set_defaults(handler=_serve)


def _serve(args: argparse.Namespace) -> int:
    # Imported here so that `validate`, which runs in users' CI, starts without
    # loading the Kubernetes client and the server machinery.
    from webhook.server import ConfigurationError, ServeOptions, serve, split_address

    configure_json_logging(args.log_level)
    if not args.operator_username:
        print("trussium-webhook serve: --operator-username is required", file=sys.stderr)
        return 2
    try:
        for address in (args.bind_address, args.health_bind_address):
            split_address(address)
    except ValueError as error:
        print(f"trussium-webhook serve: {error}", file=sys.stderr)
        return 2
    options = ServeOptions(
        operator_username=args.operator_username,
        bind_address=args.bind_address,
        health_bind_address=args.health_bind_address,
        cert_mode=args.cert_mode,
        cert_dir=args.cert_dir,
        namespace=args.namespace,
        secret_name=args.secret_name,
        service_name=args.service_name,
        dns_names=tuple(args.dns_name or _env_list("dns-name")),
        ip_addresses=tuple(args.ip_address or _env_list("ip-address")),
        webhook_config_names=tuple(
            args.webhook_config_name or _env_list("webhook-config-name", [WEBHOOK_CONFIG_NAME])
        ),
        kubeconfig=args.kubeconfig,
        max_request_bytes=args.max_request_bytes,
        limits=ConnectionLimits(
            header_timeout=args.header_timeout, max_connections=args.max_connections
        ),
        body_timeout=args.body_timeout,
        secret_lookup=args.secret_lookup,
        shutdown_delay=args.shutdown_delay,
        shutdown_timeout=args.shutdown_timeout,
    )
    try:
        asyncio.run(serve(options))
    except ConfigurationError as error:
        print(f"trussium-webhook serve: {error}", file=sys.stderr)
        return 2
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="trussium-webhook", description="The TrussiumRuntime admission webhook."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    _add_serve_command(commands)
    add_validate_command(commands)
    add_certs_commands(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    code: int = args.handler(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
