"""The container and duration of a clip, from its bytes (the decoding is ``decode``'s).

PyAV loads about 100 MB of FFmpeg libraries, so ``decode`` is imported on the first
measurement, not with this module: start-up (and ``parley serve`` refusing a bad config
at once) does not pay for it.
"""

from __future__ import annotations

import io
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO

from parley.audio.budget import DEFAULT_BUDGET, DecodeBudget
from parley.audio.info import AudioInfo
from parley.audio.sniff import sniff

AudioSource = bytes | bytearray | memoryview | str | os.PathLike[str] | IO[bytes]
"""Bytes in memory, a file path, or a seekable binary file (read from its position)."""


def probe(
    source: AudioSource,
    budget: DecodeBudget = DEFAULT_BUDGET,
    stop: threading.Event | None = None,
) -> AudioInfo:
    """Sniff and measure ``source``; raises ``NotAudio`` or ``EmptyAudio``, or
    ``AudioTooLong`` / ``AudioTooCostly`` past ``budget`` (``ProbeStopped`` once ``stop``
    is set).

    CPU-bound (it decodes the whole clip), so async callers run it in a thread: uploads
    go through a ``ProbePool``. A file object is left where it was.
    """
    from parley.audio import decode  # PyAV, on first use (module docstring)

    with _binary(source) as file:
        start = file.tell()
        size = file.seek(0, io.SEEK_END) - start
        file.seek(start)
        container = sniff(file)
        try:
            return decode.measure(file, container, size, budget, stop)
        finally:
            file.seek(start)


def pcm_seconds(
    byte_count: int, sample_rate: int, channels: int = 1, sample_width: int = 2
) -> float:
    """The duration of raw PCM (no container to probe): bytes over bytes per second."""
    return byte_count / (sample_rate * channels * sample_width)


@contextmanager
def _binary(source: AudioSource) -> Iterator[IO[bytes]]:
    if isinstance(source, bytes | bytearray | memoryview):
        yield io.BytesIO(source)
    elif isinstance(source, str | os.PathLike):
        with open(source, "rb") as file:
            yield file
    else:
        yield source
