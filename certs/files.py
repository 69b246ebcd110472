"""The certificate folder the webhook serves from: `tls.crt`, `tls.key`, `ca.crt`.

The same layout as a mounted kubernetes.io/tls Secret or a cert-manager
Certificate, so every mode ends in one folder the reloader watches. Each file
is replaced atomically (temporary file, fsync, rename): a reader sees the old
or the new content, never a torn file. The reloader copes with the moment
between two renames where the certificate and the key do not match yet.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

TLS_CERT_FILE = "tls.crt"
TLS_KEY_FILE = "tls.key"
CA_CERT_FILE = "ca.crt"

_PUBLIC_MODE = 0o644
_SECRET_MODE = 0o600


@dataclass(frozen=True)
class BundleFiles:
    """PEM contents of a certificate folder; `ca_pem` is empty when there is no ca.crt."""

    certificate_pem: bytes
    private_key_pem: bytes
    ca_pem: bytes = b""


def write_bundle(directory: Path, bundle: BundleFiles) -> bool:
    """Write the files whose content differs; True when anything was written."""
    directory.mkdir(parents=True, exist_ok=True)
    # Key first: until the certificate follows, the pair mismatches and the
    # reloader keeps serving the old one rather than a certificate without its key.
    wanted = [
        (TLS_KEY_FILE, bundle.private_key_pem, _SECRET_MODE),
        (TLS_CERT_FILE, bundle.certificate_pem, _PUBLIC_MODE),
    ]
    if bundle.ca_pem:
        wanted.append((CA_CERT_FILE, bundle.ca_pem, _PUBLIC_MODE))
    written = False
    for name, content, mode in wanted:
        path = directory / name
        if _read_or_none(path) != content:
            atomic_write(path, content, mode)
            written = True
    return written


def read_bundle(directory: Path) -> BundleFiles:
    """The folder's contents; raises FileNotFoundError when tls.crt or tls.key is absent."""
    return BundleFiles(
        certificate_pem=(directory / TLS_CERT_FILE).read_bytes(),
        private_key_pem=(directory / TLS_KEY_FILE).read_bytes(),
        ca_pem=_read_or_none(directory / CA_CERT_FILE) or b"",
    )


def atomic_write(path: Path, content: bytes, mode: int) -> None:
    """Replace `path` with `content`; the file has `mode` from its first byte on."""
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), mode)
            handle.write(content)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _read_or_none(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
