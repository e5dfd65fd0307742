"""Voice activity detection by energy, on 16-bit mono PCM: where a caller's turn begins
and ends in a realtime cascade's input (``api/cascade.py``, docs/realtime.md).

The audio is cut into frames of ``FRAME_MS``; a frame is *voiced* when its loudness
(root mean square, as a share of full scale) reaches ``threshold * LOUDNESS_AT_ONE``,
so the protocol's ``turn_detection.threshold`` (0 to 1, default 0.5) asks for a louder
voice the higher it is (0.5: about -32 dBFS). Speech starts at ``START_FRAMES`` voiced
frames in a row (a click is not a turn) and is reported ``prefix_padding_ms`` earlier,
so the turn keeps the breath before the first word; it stops once
``silence_duration_ms`` of unvoiced frames follow, reported at the end of the last
voiced frame. Positions are milliseconds of all the audio fed, as the protocol's
``audio_start_ms`` and ``audio_end_ms`` are. Nothing here does I/O.
"""

from __future__ import annotations

import math
from array import array
from dataclasses import dataclass

FRAME_MS = 10
START_FRAMES = 3
"""Voiced frames in a row that make speech (``START_FRAMES * FRAME_MS``)."""
LOUDNESS_AT_ONE = 0.05
"""The loudness (RMS, share of full scale) a frame needs at ``threshold`` 1.0."""
FULL_SCALE = 32768


@dataclass(frozen=True, slots=True)
class Speech:
    """Speech began (``started``) or ended, at ``at_ms`` of the audio fed."""

    started: bool
    at_ms: int


class VoiceDetector:
    """Fed PCM as it arrives, it tells where speech starts and stops (``Speech``)."""

    __slots__ = (
        "_frame_bytes",
        "_frames",
        "_last_voiced",
        "_level",
        "_prefix_ms",
        "_rest",
        "_run",
        "_silence_frames",
        "_silent",
        "speaking",
    )

    def __init__(
        self,
        *,
        threshold: float = 0.5,
        prefix_padding_ms: int = 300,
        silence_duration_ms: int = 500,
        rate: int = 24_000,
    ) -> None:
        self._frame_bytes = rate * FRAME_MS // 1000 * 2
        level = max(0.0, min(threshold, 1.0)) * LOUDNESS_AT_ONE * FULL_SCALE
        self._level = level * level  # compared with the mean square: no square root
        self._prefix_ms = max(0, prefix_padding_ms)
        self._silence_frames = max(1, math.ceil(silence_duration_ms / FRAME_MS))
        self._rest = b""
        self._frames = 0
        """Frames fed so far (their start is ``_frames * FRAME_MS``)."""
        self._run = 0
        """Voiced frames in a row (before speech), or unvoiced ones (during it)."""
        self._silent = 0
        self._last_voiced = 0
        self.speaking = False

    @property
    def heard_ms(self) -> int:
        """The milliseconds of audio fed, in whole frames."""
        return self._frames * FRAME_MS

    def feed(self, pcm: bytes) -> list[Speech]:
        """The starts and stops found in ``pcm`` (following what was fed before)."""
        data = self._rest + pcm if self._rest else pcm
        size = self._frame_bytes
        whole = len(data) - len(data) % size
        self._rest = data[whole:]
        found: list[Speech] = []
        for offset in range(0, whole, size):
            samples = array("h", data[offset : offset + size])
            voiced = sum(s * s for s in samples) >= self._level * len(samples)
            event = self._frame(voiced)
            if event is not None:
                found.append(event)
        return found

    def _frame(self, voiced: bool) -> Speech | None:
        index = self._frames
        self._frames += 1
        if not self.speaking:
            self._run = self._run + 1 if voiced else 0
            if self._run < START_FRAMES:
                return None
            self.speaking, self._silent = True, 0
            self._last_voiced = index + 1
            onset = (index + 1 - START_FRAMES) * FRAME_MS
            return Speech(True, max(0, onset - self._prefix_ms))
        if voiced:
            self._silent = 0
            self._last_voiced = index + 1
            return None
        self._silent += 1
        if self._silent < self._silence_frames:
            return None
        self.speaking, self._run = False, 0
        return Speech(False, self._last_voiced * FRAME_MS)

    def reset(self) -> None:
        """Forget a turn in progress (the buffer was cleared or committed by hand)."""
        self.speaking = False
        self._run = self._silent = 0

    def skip(self, pcm_bytes: int) -> None:
        """Count audio that was not examined (detection is off) so positions stay true."""
        data = len(self._rest) + pcm_bytes
        self._frames += data // self._frame_bytes
        self._rest = b"\0" * (data % self._frame_bytes)
