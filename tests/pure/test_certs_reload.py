"""Hot reload, observed through real TLS handshakes on loopback."""

from __future__ import annotations

import asyncio
import logging
import os
import ssl
import sys
import warnings
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID

from trussium_operator.certs.authority import (
    CertificateError,
    KeyPair,
    generate_ca,
    issue_serving_certificate,
)
from trussium_operator.certs.files import BundleFiles, write_bundle
from trussium_operator.certs.reload import ReloadingTLS

NOW = datetime.now(UTC)


def issue_into(folder: Path, ca: KeyPair) -> KeyPair:
    serving = issue_serving_certificate(ca, ["localhost"], ["127.0.0.1"], now=NOW)
    write_bundle(
        folder,
        BundleFiles(serving.certificate_pem, serving.private_key_pem, ca.certificate_pem),
    )
    return serving


def client_context(ca: KeyPair) -> ssl.SSLContext:
    context = ssl.create_default_context(cadata=ca.certificate_pem.decode())
    return context


async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while line := await reader.readline():
        writer.write(line)
        await writer.drain()
    writer.close()


@dataclass
class Served:
    tls: ReloadingTLS
    folder: Path
    ca: KeyPair
    first: KeyPair
    port: int

    async def connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        return await asyncio.open_connection(
            "127.0.0.1", self.port, ssl=client_context(self.ca), server_hostname="127.0.0.1"
        )

    async def presented_serial(self) -> int:
        """Serial number of the certificate a new handshake presents."""
        _, writer = await self.connect()
        der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
        writer.close()
        await writer.wait_closed()
        return x509.load_der_x509_certificate(der).serial_number


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    ca = generate_ca("test-ca", now=NOW)
    first = issue_into(tmp_path, ca)
    tls = ReloadingTLS(tmp_path, poll_seconds=0.05)
    server = await asyncio.start_server(echo, "127.0.0.1", 0, ssl=tls.context)
    port = server.sockets[0].getsockname()[1]
    async with server:
        yield Served(tls, tmp_path, ca, first, port)


async def roundtrip(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, text: bytes
) -> bytes:
    writer.write(text)
    await writer.drain()
    return await reader.readline()


async def test_reload_serves_the_new_certificate_and_open_connections_keep_working(
    served: Served,
) -> None:
    assert await served.presented_serial() == served.first.certificate.serial_number
    reader, writer = await served.connect()
    assert await roundtrip(reader, writer, b"before\n") == b"before\n"

    second = issue_into(served.folder, served.ca)
    assert served.tls.reload()

    assert await served.presented_serial() == second.certificate.serial_number
    assert served.tls.not_after == second.certificate.not_valid_after_utc
    assert await roundtrip(reader, writer, b"after\n") == b"after\n"
    writer.close()
    await writer.wait_closed()


async def test_unchanged_files_are_not_reloaded(served: Served) -> None:
    assert not served.tls.reload()
    assert await served.presented_serial() == served.first.certificate.serial_number


async def test_polling_picks_up_rotated_files(served: Served) -> None:
    task = asyncio.create_task(served.tls.run())
    try:
        second = issue_into(served.folder, served.ca)
        for _ in range(100):
            if await served.presented_serial() == second.certificate.serial_number:
                break
            await asyncio.sleep(0.05)
        else:
            pytest.fail("the rotated certificate was not served within 5 seconds")
    finally:
        task.cancel()


async def test_corrupted_files_keep_the_served_certificate(
    served: Served, caplog: pytest.LogCaptureFixture
) -> None:
    first_serial = served.first.certificate.serial_number
    key_file = served.folder / "tls.key"
    good_key = key_file.read_bytes()
    key_file.write_bytes(good_key[:100])
    with caplog.at_level(logging.WARNING, logger="trussium_operator.certs.reload"):
        assert not served.tls.reload()
    assert "keeping the served certificate" in caplog.text
    assert good_key[40:90].decode() not in caplog.text
    assert await served.presented_serial() == first_serial
    assert served.tls.not_after == served.first.certificate.not_valid_after_utc

    key_file.write_bytes(good_key)
    assert not served.tls.reload()  # the original content again: already served
    assert await served.presented_serial() == first_serial


async def test_half_written_rotation_waits_for_the_matching_key(
    served: Served, caplog: pytest.LogCaptureFixture
) -> None:
    second = issue_serving_certificate(served.ca, [], ["127.0.0.1"], now=NOW)
    (served.folder / "tls.crt").write_bytes(second.certificate_pem)
    with caplog.at_level(logging.WARNING, logger="trussium_operator.certs.reload"):
        assert not served.tls.reload()
    assert "the private key does not belong to the certificate" in caplog.text
    assert await served.presented_serial() == served.first.certificate.serial_number

    (served.folder / "tls.key").write_bytes(second.private_key_pem)
    assert served.tls.reload()
    assert await served.presented_serial() == second.certificate.serial_number


def rsa_pair() -> tuple[bytes, bytes]:
    """A self-signed RSA certificate for 127.0.0.1 and its key, as PEM."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(NOW)
        .not_valid_after(NOW + timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return certificate.public_bytes(serialization.Encoding.PEM), key_pem


async def test_unusable_pairs_are_refused_saying_why(
    served: Served, caplog: pytest.LogCaptureFixture
) -> None:
    """Only unencrypted ECDSA keys are served (docs/certificates.md); an encrypted key is
    refused without OpenSSL asking for a passphrase on a terminal."""
    second = issue_serving_certificate(served.ca, [], ["127.0.0.1"], now=NOW)
    encrypted = second.private_key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"passphrase"),
    )
    for (certificate, key), why in [
        (rsa_pair(), "the certificate's key is not an ECDSA key"),
        ((second.certificate_pem, encrypted), "not an unencrypted PEM private key"),
        ((second.certificate_pem, b"-----BEGIN PRIVATE KEY-----\nAAAA\n"), "OpenSSL cannot"),
        ((b"not a certificate", second.private_key_pem), "not a PEM certificate bundle"),
    ]:
        write_bundle(served.folder, BundleFiles(certificate, key))
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="trussium_operator.certs.reload"):
            assert not served.tls.reload()
        assert why in caplog.text
        assert await served.presented_serial() == served.first.certificate.serial_number
        assert served.tls.not_after == served.first.certificate.not_valid_after_utc


def tls11_client(ca: KeyPair) -> ssl.SSLContext:
    context = client_context(ca)
    context.set_ciphers("DEFAULT:@SECLEVEL=0")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        context.minimum_version = ssl.TLSVersion.TLSv1_1
        context.maximum_version = ssl.TLSVersion.TLSv1_1
    return context


async def tls11_handshake(port: int, ca: KeyPair) -> None:
    _, writer = await asyncio.open_connection(
        "127.0.0.1", port, ssl=tls11_client(ca), server_hostname="127.0.0.1"
    )
    writer.close()


async def test_tls_1_1_clients_are_refused(served: Served, tmp_path: Path) -> None:
    # Control: this client really speaks TLS 1.1 to a server that allows it.
    permissive = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    permissive.set_ciphers("DEFAULT:@SECLEVEL=0")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        permissive.minimum_version = ssl.TLSVersion.TLSv1_1
    permissive.load_cert_chain(served.folder / "tls.crt", served.folder / "tls.key")
    async with await asyncio.start_server(echo, "127.0.0.1", 0, ssl=permissive) as control:
        try:
            await tls11_handshake(control.sockets[0].getsockname()[1], served.ca)
        except (ssl.SSLError, ConnectionError):
            pytest.skip("this OpenSSL build cannot speak TLS 1.1 at all")

    with pytest.raises((ssl.SSLError, ConnectionError)):
        await tls11_handshake(served.port, served.ca)


def tls12_client(ca: KeyPair, ciphers: str) -> ssl.SSLContext:
    context = client_context(ca)
    context.maximum_version = ssl.TLSVersion.TLSv1_2
    context.set_ciphers(ciphers)
    return context


async def tls12_cipher(port: int, ca: KeyPair, ciphers: str) -> str:
    """The TLS 1.2 suite the server picks from the client's offer."""
    _, writer = await asyncio.open_connection(
        "127.0.0.1", port, ssl=tls12_client(ca, ciphers), server_hostname="127.0.0.1"
    )
    cipher = writer.get_extra_info("cipher")
    writer.close()
    return str(cipher[0])


async def test_tls_1_2_serves_aead_suites_only(served: Served) -> None:
    for offer in ("ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE-ECDSA-CHACHA20-POLY1305"):
        assert await tls12_cipher(served.port, served.ca, offer) == offer
    # A client that offers nothing but CBC suites (which OpenSSL's defaults still
    # accept over TLS 1.2) gets no handshake at all.
    with pytest.raises((ssl.SSLError, ConnectionError)):
        await tls12_cipher(
            served.port, served.ca, "ECDHE-ECDSA-AES128-SHA256:ECDHE-ECDSA-AES256-SHA"
        )


def test_a_folder_without_a_usable_pair_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(CertificateError, match="no usable certificate"):
        ReloadingTLS(tmp_path)


_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT


def test_the_key_is_loaded_without_writing_any_file(tmp_path: Path) -> None:
    """The served folder is memory-backed; no copy of the key may land on a disk."""
    issue_into(tmp_path, generate_ca("test-ca", now=NOW))
    written: list[str] = []
    recording = [True]

    def record(event: str, args: tuple[object, ...]) -> None:
        if recording[0] and event == "open":
            path, mode, flags = args
            if (isinstance(mode, str) and set(mode) & set("wax+")) or (
                isinstance(flags, int) and flags & _WRITE_FLAGS
            ):
                written.append(str(path))

    sys.addaudithook(record)  # audit hooks cannot be removed: this one is switched off below
    try:
        tls = ReloadingTLS(tmp_path)
    finally:
        recording[0] = False
    assert tls.certificate is not None
    assert written == []
