"""Speech made by the real eSpeak NG (through ``parley engine serve``), cut to a length and
written in each container ``tests.clips.FORMATS`` names, with PyAV."""

from __future__ import annotations

import urllib.request

import av
import orjson

from tests.clips import FORMATS, written

ENGINE_RATE = 24_000
PARAGRAPH = (
    "Parley puts many engines behind one interface. This sentence was spoken by eSpeak, "
    "a small synthesizer that runs anywhere, and it is long enough to be cut to any length."
)


def espeak_pcm(v1: str, text: str = PARAGRAPH, voice: str = "en-m3") -> bytes:
    """16-bit mono samples at 24 kHz, as the engine says ``text``."""
    body = {"model": "espeak-ng", "input": text, "voice": voice, "response_format": "pcm"}
    request = urllib.request.Request(
        f"{v1}/audio/speech",
        data=orjson.dumps(body),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=120) as reply:
        return bytes(reply.read())


def cut(pcm: bytes, seconds: float) -> bytes:
    """``pcm`` repeated as often as needed and cut to ``seconds``."""
    wanted = round(seconds * ENGINE_RATE) * 2
    return (pcm * (wanted // len(pcm) + 1))[:wanted]


def speech_clip(pcm: bytes, seconds: float, kind: str) -> bytes:
    """``seconds`` of the speech in ``pcm`` in the container ``kind``."""
    rate = FORMATS[kind][2]
    source = cut(pcm, seconds)
    frame = av.AudioFrame(format="s16", layout="mono", samples=len(source) // 2)
    frame.planes[0].update(source)
    frame.sample_rate = ENGINE_RATE
    resampler = av.AudioResampler(format="s16", layout="mono", rate=rate)
    samples = b"".join(
        bytes(f.planes[0])[: f.samples * 2]
        for f in [*resampler.resample(frame), *resampler.resample(None)]
    )
    return written(samples, kind)
