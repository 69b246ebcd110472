"""The /metrics flags of both programs, checked; the server they configure is
`serving/metrics_server.py`, loaded only by the commands that serve.

/metrics is served as the Go operator serves its own (docs/adr/0026): HTTPS on
8443, each request reviewed by the API server (`serving/metrics_auth.py`); plain
HTTP only with `--metrics-secure=false`.

The certificate is one made at start (self-signed, as controller-runtime
makes one) unless `--metrics-cert-path` names a folder with `tls.crt` and
`tls.key` (a mounted Secret, cert-manager's), which is then reloaded when
the files change. A folder still empty at start is served a self-signed
certificate until the files appear: the chart mounts the webhook's serving
Secret into the controller as an optional volume, and in `selfManaged` mode
the controller itself writes that Secret after it starts (docs/adr/0039).
"""

import argparse
from dataclasses import dataclass
from pathlib import Path

from trussium_operator.cmdline.options import (
    ConfigurationError,
    add_flag,
    boolean,
    env_bool,
)
from trussium_operator.serving.addresses import DISABLED, split_address

DEFAULT_ADDRESS = "0.0.0.0:8443"


@dataclass(frozen=True)
class MetricsOptions:
    address: str = DEFAULT_ADDRESS
    secure: bool = True
    cert_path: Path | None = None


def add_metrics_flags(parser: argparse.ArgumentParser) -> None:
    """`--metrics-bind-address`, `--metrics-secure[=BOOL]` and `--metrics-cert-path`,
    spelled as the Go operator spells them."""
    add_flag(
        parser,
        "--metrics-bind-address",
        default=DEFAULT_ADDRESS,
        help='HOST:PORT of /metrics; "0" disables',
    )
    parser.add_argument(
        "--metrics-secure",
        nargs="?",
        const=True,
        type=boolean,
        default=env_bool("--metrics-secure", True),
        metavar="BOOL",
        help="HTTPS, each request authenticated (TokenReview) and authorized "
        "(SubjectAccessReview: get on /metrics) by the API server (default); "
        "--metrics-secure=false: plain HTTP, readable by anyone who reaches the port",
    )
    add_flag(
        parser,
        "--metrics-cert-path",
        type=Path,
        default=None,
        help="folder with tls.crt and tls.key for the metrics server, reloaded when they "
        "change (a self-signed certificate until they first appear); default: a "
        "self-signed certificate made at start",
    )


def metrics_options(args: argparse.Namespace) -> MetricsOptions:
    """The parsed flags, checked: ConfigurationError when they cannot be served."""
    if args.metrics_bind_address != DISABLED:
        try:
            split_address(args.metrics_bind_address)
        except ValueError as error:
            raise ConfigurationError(f"--metrics-bind-address: {error}") from None
    path: Path | None = args.metrics_cert_path
    if path is not None and not path.is_dir():
        raise ConfigurationError(f"--metrics-cert-path {path}: not a folder")
    if path is not None and not args.metrics_secure:
        raise ConfigurationError("--metrics-cert-path needs --metrics-secure")
    return MetricsOptions(args.metrics_bind_address, bool(args.metrics_secure), path)
