"""What the programs load at start: `validate` runs as a cold process in users' CI,
and the webhook's memory at start is mostly its imports (docs/adr/0048)."""

import json
import subprocess
import sys
import textwrap
from datetime import UTC, datetime
from pathlib import Path

from trussium_operator.certs.authority import generate_ca, issue_serving_certificate
from trussium_operator.certs.files import BundleFiles, write_bundle


def _in_fresh_process(code: str, *args: str) -> object:
    """Run `code` in a new interpreter; it prints one JSON value, returned."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(done.stdout)


def test_validate_loads_no_server_client_or_certificate_machinery() -> None:
    loaded = _in_fresh_process(
        """
        import json, sys
        import trussium_operator.webhook.cli
        heavy = {"aiohttp", "asyncio", "cryptography", "kubernetes_asyncio", "prometheus_client"}
        heavy |= {"multiprocessing", "xml"}  # validate's forks and JUnit output: when used
        print(json.dumps(sorted(heavy & {name.split(".")[0] for name in sys.modules})))
        """
    )
    assert loaded == []


def test_lazy_kubernetes_client_gives_the_same_classes_without_loading_every_model() -> None:
    found = _in_fresh_process(
        """
        import asyncio, json, sys, types
        from trussium_operator.cmdline import lazy_kubernetes
        lazy_kubernetes.install()
        from kubernetes_asyncio import client, config
        from trussium_operator.webhook import server
        at_start = sum(name.startswith("kubernetes_asyncio.client.models.") for name in sys.modules)
        review = client.V1SubjectAccessReview
        from kubernetes_asyncio.client.models.v1_subject_access_review import (
            V1SubjectAccessReview,
        )
        async def answer():  # as the webhook's access review reads the API server's answer
            async with client.ApiClient(client.Configuration()) as api:
                body = '{"spec": {"user": "u"}, "status": {"allowed": true}}'
                read = api.deserialize(types.SimpleNamespace(data=body), "V1SubjectAccessReview")
                return type(read) is V1SubjectAccessReview and read.status.allowed
        try:
            client.NoSuchName
            missing = "found"
        except AttributeError:
            missing = "AttributeError"
        print(json.dumps({
            "models_at_start": at_start,
            "same_class": review is V1SubjectAccessReview,
            "api": client.AuthorizationV1Api.__module__,
            "config": config.load_kube_config.__module__,
            "missing": missing,
            "deserialized": asyncio.run(answer()),
        }))
        """
    )
    assert found == {
        "models_at_start": 0,
        "same_class": True,
        "api": "kubernetes_asyncio.client.api.authorization_v1_api",
        "config": "kubernetes_asyncio.config.kube_config",
        "missing": "AttributeError",
        "deserialized": True,
    }


def test_serving_loads_no_certificate_library(tmp_path: Path) -> None:
    """The webhook reads and reloads its certificate with OpenSSL alone: the cryptography
    package (about 9 MiB resident) is loaded only to make a certificate (docs/adr/0052)."""
    now = datetime.now(UTC)
    ca = generate_ca("test-ca", now=now)
    pair = issue_serving_certificate(ca, ["localhost"], now=now)
    write_bundle(tmp_path, BundleFiles(pair.certificate_pem, pair.private_key_pem))
    found = _in_fresh_process(
        """
        import json, sys
        from pathlib import Path
        from trussium_operator.cmdline import lazy_kubernetes
        lazy_kubernetes.install()
        from trussium_operator.webhook import server
        from trussium_operator.certs.reload import ReloadingTLS
        tls = ReloadingTLS(Path(sys.argv[1]))
        loaded = "cryptography" in sys.modules
        expiry = tls.not_after.isoformat()
        from trussium_operator.certs.reload import self_signed_context
        self_signed_context()
        made = "cryptography" in sys.modules
        print(json.dumps({"cryptography": loaded, "expiry": expiry, "made": made}))
        """,
        str(tmp_path),
    )
    assert found == {
        "cryptography": False,
        "expiry": pair.certificate.not_valid_after_utc.isoformat(),
        "made": True,
    }
