"""Speech recognition with PocketSphinx and the US English model its wheel ships.

A ``Recognizer`` holds one decoder (loading the model takes seconds), so the engine keeps
one per recognition thread; its cepstral mean is reset before each clip, so what it hears
does not depend on the clips before. A clip (16 kHz mono 16-bit samples) is decoded as one
utterance; the words PocketSphinx aligned (fillers, silences and sentence marks left out,
alternate pronunciations such as ``read(2)`` named by their word) are grouped into
segments at every pause of ``PAUSE_SECONDS`` or more.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

PAUSE_SECONDS = 0.4
_ALTERNATE = re.compile(r"\(\d+\)$")


@dataclass(frozen=True, slots=True)
class Word:
    word: str
    start: float
    end: float
    probability: float


@dataclass(slots=True)
class Segment:
    words: list[Word] = field(default_factory=list)

    @property
    def start(self) -> float:
        return self.words[0].start

    @property
    def end(self) -> float:
        return self.words[-1].end

    @property
    def text(self) -> str:
        return " ".join(word.word for word in self.words)

    @property
    def avg_logprob(self) -> float:
        return sum(math.log(max(w.probability, 1e-10)) for w in self.words) / len(self.words)


def spoken(word: str) -> str | None:
    """The word as written, or None for PocketSphinx's fillers and markers."""
    if not word or word[0] in "<[+" or word.startswith("++"):
        return None
    return _ALTERNATE.sub("", word)


def segments(words: list[Word]) -> list[Segment]:
    """Words grouped at pauses of ``PAUSE_SECONDS`` or more."""
    found: list[Segment] = []
    for word in words:
        if not found or word.start - found[-1].end >= PAUSE_SECONDS:
            found.append(Segment())
        found[-1].words.append(word)
    return found


class Recognizer:
    """One PocketSphinx decoder with the US English model; use from one thread at a time."""

    def __init__(self) -> None:
        from pocketsphinx import Decoder

        self._decoder: Any = Decoder(samprate=16000, logfn="/dev/null")
        self._frame_seconds = 1.0 / float(self._decoder.config["frate"])
        self._cmn_start = str(self._decoder.config["cmninit"])

    def recognize(self, pcm: bytes) -> list[Word]:
        """The words heard in 16 kHz mono 16-bit ``pcm``, with their times."""
        decoder = self._decoder
        decoder.set_cmn(self._cmn_start)  # each clip starts afresh, whatever came before
        decoder.start_utt()
        decoder.process_raw(pcm, full_utt=True)
        decoder.end_utt()
        if decoder.hyp() is None:
            return []
        words = []
        for item in decoder.seg():
            text = spoken(item.word)
            if text is None:
                continue
            words.append(
                Word(
                    text,
                    round(item.start_frame * self._frame_seconds, 3),
                    round((item.end_frame + 1) * self._frame_seconds, 3),
                    min(1.0, max(0.0, float(item.prob))),
                )
            )
        return words
