"""The engine's blocking work, off the event loop.

eSpeak NG has one synthesizer per process, so speech runs on one thread; what it makes is
handed to the loop piece by piece (``speak``), and a caller who hangs up stops it at
its next piece. Recognition runs on ``recognizers`` threads, each with its own
PocketSphinx decoder, made on the thread's first clip (``warm_up`` makes one at start).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncGenerator
from concurrent.futures import ThreadPoolExecutor

from parley.local.engine import sound
from parley.local.engine.espeak import Espeak, Voice
from parley.local.engine.sphinx import Recognizer, Word


class Workers:
    def __init__(self, espeak: Espeak, recognizers: int) -> None:
        self._espeak = espeak
        self._speech = ThreadPoolExecutor(1, thread_name_prefix="espeak")
        self._recognition = ThreadPoolExecutor(recognizers, thread_name_prefix="sphinx")
        self._local = threading.local()

    def close(self) -> None:
        self._speech.shutdown(wait=False, cancel_futures=True)
        self._recognition.shutdown(wait=False, cancel_futures=True)

    async def warm_up(self) -> None:
        """Load one PocketSphinx model now, so the first clip is not kept waiting for it."""
        await asyncio.get_running_loop().run_in_executor(self._recognition, self._recognizer)

    async def speak(
        self, text: str, voice: Voice, speed: float, rate: int
    ) -> AsyncGenerator[bytes, None]:
        """16-bit mono samples at ``rate``, as eSpeak makes them."""
        loop = asyncio.get_running_loop()
        pieces: asyncio.Queue[bytes | None] = asyncio.Queue()
        stop = threading.Event()
        resampler = sound.Resampler(self._espeak.sample_rate, rate)

        def take(samples: bytes) -> bool:
            if stop.is_set():
                return False
            converted = resampler.feed(samples)
            if converted:
                loop.call_soon_threadsafe(pieces.put_nowait, converted)
            return True

        def work() -> None:
            try:
                self._espeak.synthesize(text, voice, speed, take)
                if not stop.is_set():
                    loop.call_soon_threadsafe(pieces.put_nowait, resampler.finish())
            finally:
                loop.call_soon_threadsafe(pieces.put_nowait, None)

        done = loop.run_in_executor(self._speech, work)
        try:
            while (piece := await pieces.get()) is not None:
                if piece:
                    yield piece
            await done  # the thread's failure, if any, is raised here
        finally:
            stop.set()

    async def encode(self, pcm: bytes, rate: int, response_format: str) -> bytes:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._speech, sound.encode, pcm, rate, response_format)

    async def hear(self, data: bytes) -> tuple[list[Word], float]:
        """The words in any audio file PyAV reads, and the clip's length in seconds."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._recognition, self._hear, data)

    def _hear(self, data: bytes) -> tuple[list[Word], float]:
        pcm, duration = sound.decode_for_recognition(data)
        return (self._recognizer().recognize(pcm) if pcm else []), duration

    def _recognizer(self) -> Recognizer:
        recognizer: Recognizer | None = getattr(self._local, "recognizer", None)
        if recognizer is None:
            recognizer = self._local.recognizer = Recognizer()
        return recognizer
