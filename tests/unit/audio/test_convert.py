"""Converting engines' audio as it arrives: WAV headers off and on, MP3 by PyAV, trimming."""

from __future__ import annotations

import io
import struct

import av
import pytest

from parley.audio.convert import AudioConverter, decode_pcm, trim_to_wav
from parley.audio.errors import AudioError
from parley.audio.wav import WavReader, wav_header
from tests.upstreams.tones import encoded, sine, wav


def convert(converter: AudioConverter, data: bytes, size: int) -> bytes:
    out = [converter.feed(data[i : i + size]) for i in range(0, len(data), size)]
    return b"".join(out) + converter.finish()


def seconds_of(data: bytes) -> float:
    with av.open(io.BytesIO(data), mode="r") as container:
        frames = list(container.decode(audio=0))
    return sum(f.samples for f in frames) / frames[0].sample_rate


@pytest.mark.parametrize("size", [1, 7, 44, 4096])
def test_a_streamed_wav_becomes_its_pcm_whatever_the_pieces(size: int) -> None:
    pcm = sine(0.5, 24000)
    streamed = wav(pcm, 24000, streamed=True)
    assert convert(AudioConverter("wav", "pcm", sample_rate=1), streamed, size) == pcm


def test_chunks_before_the_data_are_skipped_and_the_rate_read() -> None:
    pcm = sine(0.1, 16000)
    head = wav_header(16000, data_size=len(pcm))
    listed = head[:36] + b"LIST" + struct.pack("<I", 5) + b"abcde\0" + head[36:]
    reader = WavReader()
    assert reader.feed(listed + pcm) == pcm
    assert reader.format is not None and reader.format.rate == 16000


def test_pcm_becomes_a_streamed_wav() -> None:
    pcm = sine(0.2, 24000)
    out = convert(AudioConverter("pcm", "wav", sample_rate=24000), pcm, 1000)
    assert out[:4] == b"RIFF" and struct.unpack("<I", out[40:44])[0] == 0xFFFFFFFF
    assert out[44:] == pcm


def test_wav_becomes_mp3_of_the_same_length_as_it_arrives() -> None:
    converter = AudioConverter("wav", "mp3", sample_rate=1)
    source = wav(sine(2.0, 44100), 44100)
    first = converter.feed(source[:44100])
    rest = convert(converter, source[44100:], 8192)
    assert first, "mp3 leaves before the whole wav has arrived"
    assert seconds_of(first + rest) == pytest.approx(2.0, abs=0.1)


def test_a_compressed_source_is_decoded_whole_at_the_end() -> None:
    converter = AudioConverter("flac", "pcm", sample_rate=1)
    flac = encoded(sine(1.0, 24000), 24000, "flac")
    assert converter.feed(flac) == b""
    assert len(converter.finish()) == 48000


def test_audio_that_is_not_wav_is_an_audio_error() -> None:
    with pytest.raises(AudioError):
        AudioConverter("wav", "pcm", sample_rate=1).feed(b"ID3" + b"\0" * 40)
    with pytest.raises(AudioError):
        decode_pcm(b"\0" * 4000)


def test_a_clip_is_trimmed_to_a_wav_of_the_length_asked() -> None:
    clip = encoded(sine(45, 16000), 16000, "mp3")
    trimmed = trim_to_wav(clip, 30)
    assert decode_pcm(trimmed)[1] == 16000
    assert seconds_of(trimmed) == pytest.approx(30, abs=0.01)
