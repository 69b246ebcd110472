"""Self-contained kubeconfig files (credentials embedded, so a file can be
copied or handed to any client without the PKI directory)."""

import base64
from pathlib import Path
from typing import Any

import yaml

CONTEXT = "devcluster"


def _b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def build(server: str, ca_cert: Path, user: dict[str, str]) -> dict[str, Any]:
    """A kubeconfig with one cluster, one user and one current context."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": CONTEXT,
                "cluster": {"server": server, "certificate-authority-data": _b64(ca_cert)},
            }
        ],
        "users": [{"name": CONTEXT, "user": user}],
        "contexts": [{"name": CONTEXT, "context": {"cluster": CONTEXT, "user": CONTEXT}}],
        "current-context": CONTEXT,
    }


def certificate_user(cert: Path, key: Path) -> dict[str, str]:
    return {"client-certificate-data": _b64(cert), "client-key-data": _b64(key)}


def token_user(token: str) -> dict[str, str]:
    return {"token": token}


def write(path: Path, config: dict[str, Any]) -> Path:
    """Write with owner-only permissions: the file holds credentials."""
    path.touch(mode=0o600)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path
