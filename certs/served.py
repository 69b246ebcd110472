"""What the certificate reloader reads of a serving certificate, without `cryptography`.

OpenSSL itself parses the certificate and checks that the key belongs to it
when a context loads the pair; the reloader needs only three facts beside:
the serial number and the expiry (its log line and the expiry metric) and
whether the key is an ECDSA one (docs/certificates.md). They are read here
from the DER of the bundle's first certificate, the one OpenSSL serves, so
the webhook starts without importing the cryptography package (about 9 MiB
resident, docs/adr/0052). Pure; any malformed input is a CertificateError.
"""

from __future__ import annotations

import binascii
import re
from dataclasses import dataclass
from datetime import UTC, datetime

# A PEM block; OpenSSL serves the first of a certificate's labels and skips the others.
_BLOCK = re.compile(rb"-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END \1-----", re.DOTALL)
_CERTIFICATE_LABELS = (b"CERTIFICATE", b"X509 CERTIFICATE", b"TRUSTED CERTIFICATE")
# DER tags (X.690) of what a certificate is read through.
_SEQUENCE = 0x30
_INTEGER = 0x02
_OBJECT_IDENTIFIER = 0x06
_UTC_TIME = 0x17
_GENERALIZED_TIME = 0x18
_EXPLICIT_VERSION = 0xA0
# id-ecPublicKey (RFC 5480, 1.2.840.10045.2.1), DER-encoded.
_EC_PUBLIC_KEY = bytes.fromhex("2a8648ce3d0201")


class CertificateError(ValueError):
    """Certificate or key material is unusable. Messages never contain key bytes."""


@dataclass(frozen=True)
class ServedCertificate:
    """The facts of a certificate the reloader logs and exports."""

    serial_number: int
    not_after: datetime
    ecdsa: bool


def read_served_certificate(certificate_pem: bytes) -> ServedCertificate:
    """The first certificate of a PEM bundle, read; CertificateError if it is none."""
    blocks = _BLOCK.finditer(certificate_pem)
    block = next((b for b in blocks if b.group(1) in _CERTIFICATE_LABELS), None)
    if block is None:
        raise CertificateError("not a PEM certificate bundle")
    try:
        der = binascii.a2b_base64(block.group(2))
    except binascii.Error:
        raise CertificateError("not a PEM certificate bundle") from None
    certificate = _Reader(der).enter(_SEQUENCE)
    tbs = certificate.enter(_SEQUENCE)
    if tbs.peek() == _EXPLICIT_VERSION:
        tbs.skip()
    serial = int.from_bytes(tbs.read(_INTEGER), "big", signed=True)
    tbs.skip()  # signature algorithm
    tbs.skip()  # issuer
    validity = tbs.enter(_SEQUENCE)
    validity.skip()  # notBefore
    not_after = _time(*validity.read_any((_UTC_TIME, _GENERALIZED_TIME)))
    tbs.skip()  # subject
    algorithm = tbs.enter(_SEQUENCE).enter(_SEQUENCE).read(_OBJECT_IDENTIFIER)
    return ServedCertificate(serial, not_after, algorithm == _EC_PUBLIC_KEY)


class _Reader:
    """Reads DER values one after another from `data`; every overrun is a CertificateError."""

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._at = 0

    def peek(self) -> int:
        if self._at >= len(self._data):
            raise CertificateError("the certificate is truncated")
        return self._data[self._at]

    def read_any(self, tags: tuple[int, ...]) -> tuple[int, bytes]:
        """The next value's tag (one of `tags`) and contents."""
        tag = self.peek()
        if tag not in tags:
            raise CertificateError("not an X.509 certificate")
        at = self._at + 1
        length = self._byte(at)
        at += 1
        if length & 0x80:  # long form: that many bytes of length follow
            count = length & 0x7F
            if not 1 <= count <= 4:
                raise CertificateError("not an X.509 certificate")
            length = int.from_bytes(self._bytes(at, count), "big")
            at += count
        contents = self._bytes(at, length)
        self._at = at + length
        return tag, contents

    def read(self, tag: int) -> bytes:
        return self.read_any((tag,))[1]

    def enter(self, tag: int) -> _Reader:
        """A reader of the next value's contents."""
        return _Reader(self.read(tag))

    def skip(self) -> None:
        self.read(self.peek())

    def _byte(self, at: int) -> int:
        return self._bytes(at, 1)[0]

    def _bytes(self, at: int, count: int) -> bytes:
        if at + count > len(self._data):
            raise CertificateError("the certificate is truncated")
        return self._data[at : at + count]


def _time(tag: int, contents: bytes) -> datetime:
    """UTCTime (YYMMDDHHMMSSZ, years 1950 to 2049) or GeneralizedTime (YYYYMMDDHHMMSSZ),
    the forms RFC 5280 allows."""
    text = contents.decode("ascii", "replace")
    try:
        if tag == _UTC_TIME and len(text) == 13:
            parsed = datetime.strptime(text, "%y%m%d%H%M%SZ")  # %y: 69-99 -> 19xx
            year = parsed.year % 100
            parsed = parsed.replace(year=(1900 if year >= 50 else 2000) + year)
        elif tag == _GENERALIZED_TIME and len(text) == 15:
            parsed = datetime.strptime(text, "%Y%m%d%H%M%SZ")
        else:
            raise ValueError(text)
    except ValueError:
        raise CertificateError("the certificate's expiry is not a valid time") from None
    return parsed.replace(tzinfo=UTC)
