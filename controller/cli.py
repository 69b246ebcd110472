"""`trussium-controller run` and `trussium-controller render -f FILE`.

Every `run` flag also reads `TRUSSIUM_<FLAG_IN_UPPER_SNAKE>` from the
environment (ADR 0001), so the chart can configure it either way; an
explicit flag wins.
"""

import argparse
import asyncio
import logging
import os
import signal
import socket
import sys
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from common import constants as c
from common.logs import configure_json_logging
from controller.kube import connect
from controller.leader import Timing
from controller.manager import Manager, Options
from controller.render_cmd import add_render_arguments, run_render

log = logging.getLogger("controller")
IN_CLUSTER_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


def user_agent(identity: str) -> str:
    """Distinct, so audit logs and apiserver_request_total can single out the controller;
    the identity (the pod's name) tells the audit log which replica wrote."""
    try:
        release = version("trussium-operator")
    except PackageNotFoundError:
        release = "unknown"
    return f"{c.FIELD_MANAGER}/{release} ({identity})"


def _env(flag: str) -> str:
    return "TRUSSIUM_" + flag.removeprefix("--").replace("-", "_").upper()


def _default_namespace() -> str:
    if os.environ.get("POD_NAMESPACE"):
        return os.environ["POD_NAMESPACE"]
    if IN_CLUSTER_NAMESPACE.exists():
        return IN_CLUSTER_NAMESPACE.read_text().strip()
    return "default"


def _bool(text: str) -> bool:
    if text.lower() in ("1", "true", "yes", "on"):
        return True
    if text.lower() in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"not a boolean: {text!r}")


def _run_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    run = sub.add_parser(
        "run",
        help="reconcile TrussiumRuntimes until stopped",
        epilog="Each flag can also be set as TRUSSIUM_<FLAG> (e.g. TRUSSIUM_WATCH_NAMESPACE).",
    )
    flags: list[tuple[str, dict[str, object]]] = [
        ("--kubeconfig", {"default": None, "help": "else in-cluster, else KUBECONFIG"}),
        ("--watch-namespace", {"default": "", "help": "watch only this namespace (empty: all)"}),
        ("--workers", {"type": int, "default": 4}),
        ("--leader-election-id", {"default": c.FIELD_MANAGER, "help": "Lease name"}),
        ("--leader-election-namespace", {"default": None, "help": "default: the pod's"}),
        ("--lease-duration", {"type": float, "default": 15.0}),
        ("--renew-deadline", {"type": float, "default": 10.0}),
        ("--retry-period", {"type": float, "default": 2.0}),
        ("--metrics-bind-address", {"default": "0.0.0.0:8080", "help": '"0" disables'}),
        ("--health-probe-bind-address", {"default": "0.0.0.0:8081", "help": '"0" disables'}),
        ("--log-level", {"default": "info", "choices": ["debug", "info", "warning", "error"]}),
        ("--identity", {"default": None, "help": "default: POD_NAME, else the host name"}),
    ]
    for flag, options in flags:
        env = os.environ.get(_env(flag))
        if env is not None:
            options = options | {"default": env}
        run.add_argument(flag, **options)  # type: ignore[arg-type]
    elect = os.environ.get(_env("--leader-elect"))
    run.add_argument(
        "--leader-elect",
        action=argparse.BooleanOptionalAction,
        default=_bool(elect) if elect is not None else True,
        help="only the Lease holder reconciles (default: on)",
    )


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="trussium-controller")
    sub = root.add_subparsers(dest="command", required=True)
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
        raise SystemExit("need 0 < --retry-period < --renew-deadline < --lease-duration")
    if int(args.workers) < 1:
        raise SystemExit("--workers must be at least 1")
    return Options(
        watch_namespace=args.watch_namespace or None,
        workers=int(args.workers),
        leader_elect=bool(args.leader_elect),
        leader_election_id=args.leader_election_id,
        leader_election_namespace=args.leader_election_namespace or _default_namespace(),
        timing=timing,
        metrics_address=args.metrics_bind_address,
        health_address=args.health_probe_bind_address,
        identity=args.identity or os.environ.get("POD_NAME") or socket.gethostname(),
    )


async def run(args: argparse.Namespace) -> int:
    options = options_from(args)
    kube = await connect(args.kubeconfig, user_agent(options.identity))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    log.info(
        "starting",
        extra={
            "fields": {
                "identity": options.identity,
                "watchNamespace": options.watch_namespace or "",
                "leaderElect": options.leader_elect,
            }
        },
    )
    try:
        return await Manager(kube, options).run(stop)
    finally:
        await kube.api.close()


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.command == "render":
        try:
            return run_render(args.filename, sys.stdout, sys.stderr, sys.stdin)
        except BrokenPipeError:
            # The reader (`| head`) stopped early: not an error, and no traceback at exit.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 0
    configure_json_logging(args.log_level)
    return asyncio.run(run(args))


if __name__ == "__main__":
    sys.exit(main())
