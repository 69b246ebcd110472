"""The certificate folder: complete files, private keys, no needless writes."""

from __future__ import annotations

import stat
from pathlib import Path

from trussium_operator.certs.files import BundleFiles, read_bundle, write_bundle

BUNDLE = BundleFiles(b"CERT-1\n", b"KEY-1\n", b"CA-1\n")


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_written_bundle_reads_back_with_a_private_key_file(tmp_path: Path) -> None:
    folder = tmp_path / "certs"
    assert write_bundle(folder, BUNDLE)
    assert read_bundle(folder) == BUNDLE
    assert mode(folder / "tls.key") == 0o600
    assert mode(folder / "tls.crt") == 0o644
    assert mode(folder / "ca.crt") == 0o644
    assert sorted(p.name for p in folder.iterdir()) == ["ca.crt", "tls.crt", "tls.key"]


def test_unchanged_files_are_not_rewritten(tmp_path: Path) -> None:
    write_bundle(tmp_path, BUNDLE)
    before = {p.name: p.stat().st_ino for p in tmp_path.iterdir()}
    assert not write_bundle(tmp_path, BUNDLE)
    assert write_bundle(tmp_path, BundleFiles(b"CERT-2\n", b"KEY-2\n", b"CA-1\n"))
    after = {p.name: p.stat().st_ino for p in tmp_path.iterdir()}
    assert after["ca.crt"] == before["ca.crt"]
    assert after["tls.crt"] != before["tls.crt"]


def test_a_reader_of_the_old_file_never_sees_a_torn_one(tmp_path: Path) -> None:
    write_bundle(tmp_path, BUNDLE)
    with (tmp_path / "tls.key").open("rb") as old:
        write_bundle(tmp_path, BundleFiles(b"CERT-2\n", b"KEY-2-LONGER\n"))
        assert old.read() == b"KEY-1\n"
    assert (tmp_path / "tls.key").read_bytes() == b"KEY-2-LONGER\n"
    assert mode(tmp_path / "tls.key") == 0o600


def test_a_folder_without_ca_reads_as_empty_ca(tmp_path: Path) -> None:
    write_bundle(tmp_path, BundleFiles(b"CERT\n", b"KEY\n"))
    assert read_bundle(tmp_path).ca_pem == b""
    assert not (tmp_path / "ca.crt").exists()
