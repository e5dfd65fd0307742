"""The images served by URL (``runtime/image_files.py``): one group's, until they expire,
within a bound of bytes on disk, and no path but an id's."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from parley.runtime import image_files
from parley.runtime.image_files import ImageFiles, default_directory

PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 100


def names(directory: Path) -> list[str]:
    return sorted(path.name for path in directory.iterdir())


def bytes_in(directory: Path) -> int:
    return sum(path.stat().st_size for path in directory.iterdir())


async def test_an_image_is_read_back_by_its_group_only(tmp_path: Path) -> None:
    files = ImageFiles(tmp_path, ttl_seconds=60, max_bytes=10_000)
    image_id, expires = await files.keep(7, PNG, "image/png")
    assert image_id.startswith("img_") and len(image_id) == 44
    assert expires > time.time()
    kept = await files.read(7, image_id)
    assert kept is not None and (kept.data, kept.media_type) == (PNG, "image/png")
    assert await files.read(8, image_id) is None
    assert await files.read(7, image_id[:-1] + ("0" if image_id[-1] != "0" else "1")) is None


@pytest.mark.parametrize(
    "name", ["../parley.db", "img_../../etc/passwd", "img_", "IMG_" + "0" * 40]
)
async def test_no_name_but_an_ids_shape_touches_the_disk(tmp_path: Path, name: str) -> None:
    (tmp_path / "parley.db").write_bytes(b"7 image/png\nsecret")
    files = ImageFiles(tmp_path / "images", ttl_seconds=60, max_bytes=10_000)
    assert await files.read(7, name) is None


async def test_an_expired_image_is_gone_and_swept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = ImageFiles(tmp_path, ttl_seconds=60, max_bytes=10_000)
    old, _ = await files.keep(1, PNG, "image/png")
    later = time.time() + 61
    monkeypatch.setattr(image_files.time, "time", lambda: later)
    assert await files.read(1, old) is None
    monkeypatch.setattr(image_files, "SWEEP_SECONDS", -1.0)  # sweep at the next write
    fresh, _ = await files.keep(1, PNG, "image/png")
    assert names(tmp_path) == [fresh]


async def test_past_the_bound_the_oldest_images_go_first(tmp_path: Path) -> None:
    size = len(b"1 image/png\n" + PNG)
    files = ImageFiles(tmp_path, ttl_seconds=60, max_bytes=2 * size)
    first, _ = await files.keep(1, PNG, "image/png")
    ids = [first]
    for ttl in (61, 62):  # later expiries: the first is the oldest
        files._ttl = ttl
        ids.append((await files.keep(1, PNG, "image/png"))[0])
    assert await files.read(1, ids[0]) is None
    assert all([await files.read(1, image_id) for image_id in ids[1:]])
    assert bytes_in(tmp_path) <= 2 * size


def test_the_default_directory_sits_beside_a_sqlite_database() -> None:
    assert default_directory("sqlite:////var/lib/parley/parley.db") == Path(
        "/var/lib/parley/parley-images"
    )
    assert default_directory("postgresql://db/parley") == Path("parley-images")
