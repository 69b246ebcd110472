"""Hot reload of the serving certificate without a restart or a failed request.

One long-lived server `ssl.SSLContext` is handed to the HTTPS server. OpenSSL
copies the certificate into each connection at handshake time, so calling
`load_cert_chain` on the live context changes what new handshakes present
while open connections keep theirs: in-flight admissions never fail.

A file pair is loaded only after a scratch context has proven that OpenSSL
accepts the exact bytes and that the key belongs to the certificate (a
half-written rotation is skipped and picked up on the next change), so a
failed load never leaves the live context with a certificate but no key.
The certificate's serial, expiry and key type are read by `certs.served`:
serving imports no `cryptography`, which only a certificate made here needs
(docs/adr/0052). The bytes OpenSSL reads come from an anonymous memory file,
never from a file on disk (docs/adr/0011).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import ssl
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from trussium_operator.certs.files import BundleFiles, read_bundle
from trussium_operator.certs.served import (
    CertificateError,
    ServedCertificate,
    read_served_certificate,
)

DEFAULT_POLL_SECONDS = 5.0

log = logging.getLogger(__name__)


# TLS 1.2 suites with forward secrecy and authenticated encryption only: no CBC
# (Lucky13-style padding oracles), no static RSA key exchange, no finite-field DHE.
# TLS 1.3 suites are all AEAD and are not affected by this string.
TLS12_CIPHERS = "ECDHE+AESGCM:ECDHE+CHACHA20"


def server_context() -> ssl.SSLContext:
    """A TLS server context: TLS 1.2 or newer, AEAD suites only."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.set_ciphers(TLS12_CIPHERS)
    return context


def self_signed_context(
    dns_names: Sequence[str] = ("localhost",), ip_addresses: Sequence[str] = ("127.0.0.1",)
) -> tuple[ssl.SSLContext, datetime]:
    """A server context for a certificate made here and now, signed by a CA made for
    it and then forgotten (controller-runtime's default for its metrics server);
    with the certificate's expiry. Nothing of it is written to a disk."""
    chain = _self_signed_chain(dns_names, ip_addresses)
    context = server_context()
    with _memory_file(chain) as combined:
        context.load_cert_chain(combined, password=_encrypted)
    return context, read_served_certificate(chain).not_after


def _self_signed_chain(
    dns_names: Sequence[str] = ("localhost",), ip_addresses: Sequence[str] = ("127.0.0.1",)
) -> bytes:
    """PEM of a certificate, the CA made for it and its key."""
    # The one use of `cryptography` in serving: making a key and a certificate.
    from trussium_operator.certs.authority import (
        SERVING_VALIDITY,
        generate_ca,
        issue_serving_certificate,
    )

    now = datetime.now(UTC)
    ca = generate_ca("trussium-operator-self-signed", SERVING_VALIDITY, now=now)
    pair = issue_serving_certificate(ca, dns_names, ip_addresses, now=now)
    return pair.certificate_pem + ca.certificate_pem + pair.private_key_pem


class ReloadingTLS:
    """A server SSLContext whose certificate follows the files in `directory`.

    The constructor loads the files and raises CertificateError when they are
    unusable: there is nothing to serve without them. With `self_signed_until_present`
    it serves a certificate made at start instead, until usable files appear (a
    Secret volume marked optional, which the kubelet fills once the Secret exists).
    """

    def __init__(
        self,
        directory: Path,
        *,
        poll_seconds: float = DEFAULT_POLL_SECONDS,
        self_signed_until_present: bool = False,
    ) -> None:
        self.directory = directory
        self.poll_seconds = poll_seconds
        self.context = server_context()
        self._served_digest: bytes | None = None
        self._rejected_digest: bytes | None = None
        self._certificate: ServedCertificate | None = None
        self.reload()
        if self._certificate is None:
            if not self_signed_until_present:
                raise CertificateError(f"no usable certificate and key in {directory}")
            chain = _self_signed_chain()
            self._certificate = read_served_certificate(chain)
            with _memory_file(chain) as combined:
                self.context.load_cert_chain(combined, password=_encrypted)
            log.warning(
                "no usable certificate and key in %s yet: serving a self-signed one until "
                "they appear",
                directory,
            )

    @property
    def certificate(self) -> ServedCertificate:
        """The certificate new handshakes present."""
        assert self._certificate is not None  # the constructor guarantees it
        return self._certificate

    @property
    def not_after(self) -> datetime:
        """Expiry of the served certificate (UTC), for the expiry metric."""
        return self.certificate.not_after

    def reload(self) -> bool:
        """Load the files if their content changed; True when a new certificate is served.

        On failure the current certificate stays; the same content is not
        retried, the next change of the files is.
        """
        try:
            files = read_bundle(self.directory)
        except OSError as error:
            log.warning("cannot read the certificate files in %s: %s", self.directory, error)
            return False
        digest = hashlib.sha256(files.certificate_pem + b"\0" + files.private_key_pem).digest()
        if digest in (self._served_digest, self._rejected_digest):
            return False
        try:
            certificate = read_served_certificate(files.certificate_pem)
            if not certificate.ecdsa:
                raise CertificateError("the certificate's key is not an ECDSA key")
            self._load(files)
        except (CertificateError, ssl.SSLError) as error:
            log.warning(
                "keeping the served certificate; new files in %s: %s", self.directory, error
            )
            self._rejected_digest = digest
            return False
        self._served_digest = digest
        self._certificate = certificate
        log.info(
            "serving certificate loaded: serial %x, expires %s",
            certificate.serial_number,
            certificate.not_after.isoformat(),
        )
        return True

    async def run(self) -> None:
        """Poll the files until cancelled."""
        while True:
            await asyncio.sleep(self.poll_seconds)
            self.reload()

    def _load(self, files: BundleFiles) -> None:
        # load_cert_chain reads paths only: hand it a private copy of the
        # validated bytes (so a concurrent rotation cannot slip in between)
        # in an anonymous memory file, so the key never touches a disk.
        # The scratch context refuses a key that does not belong to the certificate.
        with _memory_file(files.certificate_pem + b"\n" + files.private_key_pem) as combined:
            try:
                server_context().load_cert_chain(combined, password=_encrypted)
            except ssl.SSLError as error:
                raise _refusal(error) from None
            self.context.load_cert_chain(combined, password=_encrypted)


def _encrypted() -> bytes:
    """Asked for a passphrase: without this, OpenSSL would prompt on a terminal."""
    raise CertificateError("not an unencrypted PEM private key")


def _refusal(error: ssl.SSLError) -> CertificateError:
    """OpenSSL's refusal of a pair, said plainly; its library and reason name no key bytes."""
    if error.reason == "KEY_VALUES_MISMATCH":
        return CertificateError("the private key does not belong to the certificate")
    reason = " ".join(str(part) for part in (error.library, error.reason) if part)
    return CertificateError(f"OpenSSL cannot load the certificate and key ({reason or error})")


@contextmanager
def _memory_file(content: bytes) -> Iterator[str]:
    """A path to `content` held in an anonymous memory file (memfd) of this process only."""
    descriptor = os.memfd_create("trussium-tls", os.MFD_CLOEXEC)
    try:
        os.write(descriptor, content)
        yield f"/proc/self/fd/{descriptor}"
    finally:
        os.close(descriptor)
