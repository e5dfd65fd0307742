"""Container sniffing and duration measurement (``parley.audio``)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from parley.audio import Container, EmptyAudio, NotAudio, pcm_seconds, probe, sniff
from parley.errors import InvalidRequest
from tests.clips import FORMATS, clip, streamed_wav

CONTAINERS = {
    "wav": Container.WAV,
    "mp3": Container.MP3,
    "m4a": Container.MP4,
    "ogg": Container.OGG,
    "webm": Container.WEBM,
    "flac": Container.FLAC,
}


@pytest.fixture(scope="module")
def clips() -> dict[tuple[str, float], bytes]:
    return {(kind, seconds): clip(kind, seconds) for kind in FORMATS for seconds in (3.0, 2.5)}


@pytest.mark.parametrize("kind", list(FORMATS))
@pytest.mark.parametrize("seconds", [3.0, 2.5])
def test_every_container_is_measured_to_the_millisecond(
    clips: dict[tuple[str, float], bytes], kind: str, seconds: float
) -> None:
    info = probe(clips[kind, seconds])
    assert info.container is CONTAINERS[kind]
    assert info.milliseconds == round(seconds * 1000)
    assert info.channels == 1
    assert info.sample_rate == FORMATS[kind][2]


@pytest.mark.parametrize("kind", list(FORMATS))
def test_the_container_comes_from_the_bytes(
    clips: dict[tuple[str, float], bytes], kind: str
) -> None:
    assert sniff(io.BytesIO(clips[kind, 3.0])) is CONTAINERS[kind]


def test_a_path_and_a_file_object_are_read_like_bytes(tmp_path: Path) -> None:
    data = clip("flac", 1.0)
    path = tmp_path / "speech.txt"  # the name says nothing
    path.write_bytes(data)
    assert probe(path).milliseconds == 1000
    assert probe(str(path)).milliseconds == 1000
    file = io.BytesIO(b"prefix" + data)
    file.seek(6)
    assert probe(file).milliseconds == 1000
    assert file.tell() == 6, "a file object is left where it was, ready to be sent on"


@pytest.mark.parametrize("size_field", [0, 0xFFFFFFFF])
def test_a_streamed_wav_is_measured_from_its_byte_length(size_field: int) -> None:
    info = probe(streamed_wav(3.0, size_field))
    assert info.container is Container.WAV
    assert info.milliseconds == 3000


def test_a_truncated_mp3_measures_what_is_there_not_what_its_header_claims() -> None:
    whole = clip("mp3", 4.0)
    half = probe(whole[: len(whole) // 2])
    assert 1.5 < half.seconds < 2.5, half.seconds


@pytest.mark.parametrize("kind", ["wav", "ogg", "webm", "flac"])
def test_any_file_cut_short_measures_what_is_there(kind: str) -> None:
    whole = clip(kind, 4.0)
    assert 1.0 < probe(whole[: len(whole) // 2]).seconds < 2.6


def test_an_m4a_cut_before_its_index_is_not_audio() -> None:
    whole = clip("m4a", 2.0)  # the muxer writes the index (moov) after the samples
    with pytest.raises(NotAudio, match="cannot be decoded"):
        probe(whole[: len(whole) // 2])


def test_an_id3_tag_before_the_mpeg_frames_is_skipped() -> None:
    body = b"TIT2" + (9).to_bytes(4, "big") + b"\x00\x00" + b"\x03a title"
    size = len(body)
    syncsafe = bytes([(size >> 21) & 0x7F, (size >> 14) & 0x7F, (size >> 7) & 0x7F, size & 0x7F])
    tagged = b"ID3\x04\x00\x00" + syncsafe + body + clip("mp3", 1.0)
    info = probe(tagged)
    assert info.container is Container.MP3
    assert info.milliseconds == 1000


@pytest.mark.parametrize(
    "data",
    [
        b"This is a text file renamed to speech.wav\n" * 20,
        bytes(range(256)) * 8,
        b"RIFF\x24\x00\x00\x00WAVEfmt garbage that is not a format chunk" * 4,
        b"\x1a\x45\xdf\xa3\x42\x82\x84webm" + b"\x00" * 100,
        b"\xff\xf1\x50\x80\x02\x1f\xfc" + b"\x00" * 200,  # ADTS AAC: not a listed format
        b"OggS" + b"\x00" * 60,
    ],
    ids=["text", "random", "riff-garbage", "webm-header-only", "adts-aac", "ogg-garbage"],
)
def test_what_is_not_audio_is_refused(data: bytes) -> None:
    with pytest.raises(NotAudio) as caught:
        probe(data)
    assert caught.value.status == 400
    assert caught.value.param == "file"
    assert isinstance(caught.value, InvalidRequest)


def test_an_empty_file_and_a_zero_second_clip_are_empty() -> None:
    with pytest.raises(EmptyAudio, match="empty"):
        probe(b"")
    with pytest.raises(EmptyAudio, match="0 seconds"):
        probe(streamed_wav(0.0, 36))


def test_raw_pcm_is_counted_from_bytes() -> None:
    assert pcm_seconds(48_000, 24_000) == 1.0
    assert pcm_seconds(176_400, 44_100, channels=2) == 1.0
