"""The image cache keeps what is in use and forgets what no build asked for in a week."""

import os
import time
from pathlib import Path

import pytest

from hack.image.cache import UNUSED_DAYS, prune, used


def test_prune_deletes_only_this_images_archives_unused_for_a_week(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRUSSIUM_IMAGE_CACHE", str(tmp_path))
    stale = time.time() - (UNUSED_DAYS + 1) * 86400
    archives = {
        name: tmp_path / f"{name}.tar"
        for name in ("standin-old", "standin-recent", "standin-new", "pause-old", "standin-reused")
    }
    for archive in archives.values():
        archive.write_bytes(b"")
    for name in ("standin-old", "pause-old", "standin-reused"):
        os.utime(archives[name], (stale, stale))
    used(archives["standin-reused"])

    prune("standin", keep=archives["standin-new"])

    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == ["pause-old.tar", "standin-new.tar", "standin-recent.tar", "standin-reused.tar"]
