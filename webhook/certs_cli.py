"""`trussium-webhook certs generate|inject`: certificates without cert-manager.

`generate` writes a CA and a serving certificate into a folder (the layout
`trussium-webhook serve --cert-dir` serves from); `inject` puts a CA bundle into the webhook
configurations. Exit codes: 0 done, 1 failed, 2 usage error or unusable
input (names, certificate files, kubeconfig).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from trussium_operator.certs.files import CA_CERT_FILE, BundleFiles, atomic_write, write_bundle
from trussium_operator.cmdline.options import ConfigurationError, fail
from trussium_operator.common.constants import WEBHOOK_CONFIG_NAME

if TYPE_CHECKING:  # the commands import the cryptography when they run, not `validate`
    from trussium_operator.certs.authority import KeyPair

CA_KEY_FILE = "ca.key"


def add_certs_commands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Mount `certs generate|inject`; the chosen one sets `args.handler(args) -> int`."""
    certs = subparsers.add_parser("certs", help="create certificates or inject a CA bundle")
    commands = certs.add_subparsers(dest="certs_command", required=True)

    generate = commands.add_parser(
        "generate", help="write a CA and a serving certificate into a folder"
    )
    generate.add_argument(
        "--out", type=Path, required=True, help="folder for tls.crt, tls.key, ca.crt"
    )
    generate.add_argument("--dns-name", action="append", default=[], help="repeatable")
    generate.add_argument("--ip-address", action="append", default=[], help="repeatable")
    generate.add_argument(
        "--ca-dir",
        type=Path,
        help="folder holding ca.crt and ca.key: reused when present, created otherwise "
        "(without it the CA key is discarded)",
    )
    # Unset: the validity `certs.authority` gives each (not imported to build the parser).
    generate.add_argument("--validity-days", type=_positive_int)
    generate.add_argument("--ca-validity-days", type=_positive_int)
    generate.set_defaults(handler=_generate)

    inject = commands.add_parser("inject", help="set caBundle in the webhook configurations")
    inject.add_argument(
        "--kubeconfig", help="default: in-cluster, else $KUBECONFIG, else ~/.kube/config"
    )
    inject.add_argument(
        "--webhook-config-name",
        action="append",
        help=f"repeatable; both kinds are patched under each name (default {WEBHOOK_CONFIG_NAME})",
    )
    inject.add_argument("--ca-file", type=Path, required=True, help="PEM CA bundle")
    inject.set_defaults(handler=_inject)


def main_certs(argv: Sequence[str] | None = None) -> int:
    """`trussium-webhook certs ...` on its own, for tests and scripts."""
    parser = argparse.ArgumentParser(prog="trussium-webhook")
    add_certs_commands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["certs", *(sys.argv[1:] if argv is None else argv)])
    code: int = args.handler(args)
    return code


def _generate(args: argparse.Namespace) -> int:
    from trussium_operator.certs.authority import (
        CA_VALIDITY,
        SERVING_VALIDITY,
        CertificateError,
        issue_serving_certificate,
        parse_ip_addresses,
    )

    now = datetime.now(UTC)
    ca_validity = (
        CA_VALIDITY if args.ca_validity_days is None else timedelta(days=args.ca_validity_days)
    )
    validity = (
        SERVING_VALIDITY if args.validity_days is None else timedelta(days=args.validity_days)
    )
    try:
        if not args.dns_name and not args.ip_address:
            raise CertificateError("give at least one --dns-name or --ip-address")
        parse_ip_addresses(args.ip_address)
        ca = _load_or_create_ca(args.ca_dir, ca_validity, now)
    except (CertificateError, OSError) as error:
        return fail("trussium-webhook certs generate", error)
    try:
        serving = issue_serving_certificate(ca, args.dns_name, args.ip_address, validity, now=now)
        write_bundle(
            args.out,
            BundleFiles(serving.certificate_pem, serving.private_key_pem, ca.certificate_pem),
        )
    except (CertificateError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    expires = serving.certificate.not_valid_after_utc
    print(f"wrote tls.crt, tls.key and {CA_CERT_FILE} to {args.out} (expires {expires:%Y-%m-%d})")
    return 0


def _load_or_create_ca(ca_dir: Path | None, validity: timedelta, now: datetime) -> KeyPair:
    from trussium_operator.certs.authority import CertificateError, decode_key_pair, generate_ca
    from trussium_operator.certs.rotation import CA_COMMON_NAME

    if ca_dir is not None and (ca_dir / CA_KEY_FILE).exists():
        ca = decode_key_pair(
            (ca_dir / CA_CERT_FILE).read_bytes(), (ca_dir / CA_KEY_FILE).read_bytes()
        )
        if ca.certificate.not_valid_after_utc <= now:
            raise CertificateError(f"the CA in {ca_dir} has expired; remove it to create a new one")
        return ca
    ca = generate_ca(CA_COMMON_NAME, validity, now=now)
    if ca_dir is not None:
        ca_dir.mkdir(parents=True, exist_ok=True)
        atomic_write(ca_dir / CA_KEY_FILE, ca.private_key_pem, 0o600)
        atomic_write(ca_dir / CA_CERT_FILE, ca.certificate_pem, 0o644)
    return ca


def _inject(args: argparse.Namespace) -> int:
    # The Kubernetes client is loaded only by the one command that needs it.
    import asyncio

    import aiohttp
    from kubernetes_asyncio.client.exceptions import ApiException
    from kubernetes_asyncio.config import ConfigException

    from trussium_operator.certs.authority import CertificateError, decode_certificates
    from trussium_operator.certs.inject import (
        ConflictError,
        WebhookConfigurationNotFoundError,
        describe,
    )

    try:
        ca_pem = args.ca_file.read_bytes()
        decode_certificates(ca_pem)
    except (CertificateError, OSError) as error:
        return fail("trussium-webhook certs inject", describe(error))
    try:
        patched = asyncio.run(
            _inject_async(
                args.kubeconfig, args.webhook_config_name or [WEBHOOK_CONFIG_NAME], ca_pem
            )
        )
    except (ConfigurationError, ConfigException) as error:
        return fail("trussium-webhook certs inject", describe(error))
    except (
        CertificateError,
        OSError,
        WebhookConfigurationNotFoundError,
        ConflictError,
        aiohttp.ClientError,
        ApiException,
    ) as error:
        print(f"error: {describe(error)}", file=sys.stderr)
        return 1
    print("\n".join(f"patched {name}" for name in patched) or "caBundle already up to date")
    return 0


async def _inject_async(kubeconfig: str | None, names: list[str], ca_pem: bytes) -> list[str]:
    from trussium_operator.certs.inject import inject_ca_bundle
    from trussium_operator.cmdline.kubeconfig import new_api_client

    api_client = await new_api_client(kubeconfig)
    async with api_client:
        return await inject_ca_bundle(api_client, names, ca_pem)


def _positive_int(value: str) -> int:
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return number
