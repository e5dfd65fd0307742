"""The images Parley serves by URL (``response_format: url``), kept on disk for a while.

Each image is one file in one directory (``images.url_dir``; by default
``parley-images`` beside a SQLite database), named by its id: ``img_`` then its expiry
(unix seconds, 8 hex digits) and 32 random hex digits, so the id alone says when it
expires and cannot be guessed. The file starts with one line, the group's id and the
media type, then the bytes. On disk rather than in memory because a gateway runs
several workers, and a URL made by one is fetched through any of them; and so that the
images, up to ``url_max_bytes``, weigh on no worker's memory.

Reading checks the id's shape before it touches the disk, so no path can be named, and
answers only the group that made the image. Files past their expiry are removed by a
sweep (at most once a minute, at a write); past ``url_max_bytes`` the oldest go first,
so under pressure a URL may stop serving before its time. All disk work runs on a
thread, never on the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import secrets
import time
from dataclasses import dataclass
from pathlib import Path

ID = re.compile(r"img_([0-9a-f]{8})[0-9a-f]{32}")
SWEEP_SECONDS = 60.0
HEAD_LIMIT = 128


@dataclass(frozen=True, slots=True)
class KeptImage:
    data: bytes
    media_type: str
    expires_at: int


class ImageFiles:
    """Images by id, each readable by its group until it expires."""

    def __init__(self, directory: str | Path, ttl_seconds: int, max_bytes: int) -> None:
        self._directory = Path(directory)
        self._ttl = ttl_seconds
        self._max_bytes = max_bytes
        self._bytes = 0
        """What this process believes the directory holds (set by each sweep)."""
        self._swept = 0.0

    @property
    def ttl_seconds(self) -> int:
        return self._ttl

    async def keep(self, group: int, data: bytes, media_type: str) -> tuple[str, int]:
        """Keep ``data`` for ``group``; its id and when it expires (unix seconds)."""
        expires = int(time.time()) + self._ttl
        name = f"img_{expires:08x}{secrets.token_hex(16)}"
        head = f"{group} {media_type}\n".encode()
        await asyncio.to_thread(self._write, name, head + data)
        return name, expires

    async def read(self, group: int, image_id: str) -> KeptImage | None:
        """The image ``image_id`` if it exists, has not expired, and is ``group``'s."""
        found = ID.fullmatch(image_id)
        if found is None:
            return None
        expires = int(found.group(1), 16)
        if expires <= time.time():
            return None
        raw = await asyncio.to_thread(self._read, image_id)
        if raw is None:
            return None
        head, _, data = raw.partition(b"\n")
        owner, _, media_type = head.decode("latin-1").partition(" ")
        if owner != str(group) or not media_type:
            return None
        return KeptImage(data, media_type, expires)

    def _write(self, name: str, content: bytes) -> None:
        self._directory.mkdir(parents=True, exist_ok=True)
        path = self._directory / name
        partial = path.with_suffix(".partial")
        partial.write_bytes(content)
        partial.replace(path)  # readers never see half a file
        self._bytes += len(content)
        now = time.monotonic()
        if self._bytes > self._max_bytes or now - self._swept > SWEEP_SECONDS:
            self._swept = now
            self._sweep()

    def _read(self, name: str) -> bytes | None:
        try:
            return (self._directory / name).read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            return None

    def _sweep(self) -> None:
        """Remove expired files, then the oldest until the rest fit ``max_bytes``."""
        now = time.time()
        kept: list[tuple[int, int, Path]] = []
        with os.scandir(self._directory) as entries:
            for entry in entries:
                found = ID.fullmatch(entry.name)
                if found is None:
                    continue
                expires = int(found.group(1), 16)
                with contextlib.suppress(FileNotFoundError):
                    if expires <= now:
                        os.remove(entry.path)
                    else:
                        kept.append((expires, entry.stat().st_size, Path(entry.path)))
        kept.sort()
        total = sum(size for _, size, _ in kept)
        for _, size, path in kept:
            if total <= self._max_bytes:
                break
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            total -= size
        self._bytes = total


def default_directory(database_url: str) -> Path:
    """``parley-images`` beside a SQLite database's file, else in the working directory."""
    prefix = "sqlite:///"
    if database_url.startswith(prefix) and ":memory:" not in database_url:
        return Path(database_url.removeprefix(prefix)).parent / "parley-images"
    return Path("parley-images")
