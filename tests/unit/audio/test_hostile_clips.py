"""Clips crafted to cheat the bill or burn CPU are measured truly, or refused cheaply."""

from __future__ import annotations

import io
import threading
import time

import pytest

from parley.audio import Container, NotAudio, probe
from parley.audio.budget import DecodeBudget, fewest_bytes_per_second, longest_for_size
from parley.audio.decode import measure
from parley.audio.errors import AudioTooCostly, AudioTooLong, ProbeStopped
from parley.domain.transcripts import billed_seconds
from parley.errors import InvalidRequest
from tests.clips import clip
from tests.hostile_clips import codecless, one_sample_wav, rate_changing_mp3, silent_flac


@pytest.mark.parametrize("order", [(8000, 48000), (48000, 8000)])
def test_an_mp3_that_changes_its_rate_lasts_the_sum_of_its_frames(
    order: tuple[int, int],
) -> None:
    first, second = order
    info = probe(rate_changing_mp3([(first, 50.0), (second, 10.0)]))
    # every frame counts at its own rate (each part carries its encoder's padding)
    assert 60.0 <= info.seconds < 60.3, info.seconds


def test_a_flac_of_silence_holding_hours_in_kilobytes_is_refused_early() -> None:
    data = silent_flac(20_000, 65_535, 8000)  # 300 KB that decode to 163,838 s
    started = time.thread_time()
    with pytest.raises(AudioTooLong) as refused:
        probe(data)
    assert time.thread_time() - started < 0.5, "decoding stops once the limit is passed"
    assert (refused.value.status, refused.value.param) == (400, "file")
    assert refused.value.code == "audio_too_long"
    assert "7200 seconds" in refused.value.message


def test_a_clip_under_the_duration_limit_is_measured() -> None:
    info = probe(silent_flac(100, 65_535, 8000), DecodeBudget(max_seconds=1000))
    assert info.seconds == pytest.approx(100 * 65_535 / 8000)


def test_a_flac_of_tiny_frames_is_stopped_by_its_cpu_budget() -> None:
    data = silent_flac(400_000, 16, 48_000, numbered=False)  # 5.2 MB of 16-sample frames
    budget = DecodeBudget(cpu_seconds=0.3, cpu_seconds_per_hour=0.0)
    started = time.thread_time()
    with pytest.raises(AudioTooCostly) as refused:
        probe(data, budget)
    spent = time.thread_time() - started
    assert 0.3 <= spent < 1.0, spent
    assert refused.value.code == "audio_too_costly" and refused.value.param == "file"


def test_a_long_common_clip_is_well_within_the_default_budget() -> None:
    info = probe(clip("webm", 60.0))  # 48 kHz Opus: the costliest common codec to decode
    assert info.milliseconds == 60_000


def test_a_rate_below_telephone_speech_is_refused() -> None:
    with pytest.raises(NotAudio, match="4000 Hz"):
        probe(silent_flac(3, 65_535, 4000))


def test_a_clip_longer_than_its_size_can_hold_is_refused() -> None:
    data = clip("wav", 2.0)  # 16 kHz 16-bit PCM: 32,000 bytes a second
    with pytest.raises(NotAudio, match="cannot last 2 seconds"):
        measure(io.BytesIO(data), Container.WAV, 40_000, DecodeBudget())
    assert measure(io.BytesIO(data), Container.WAV, len(data), DecodeBudget()).seconds == 2.0


def test_what_a_size_can_hold_follows_the_codec() -> None:
    assert fewest_bytes_per_second("pcm_s16le", 1, 16_000) == 32_000
    assert fewest_bytes_per_second("pcm_u8", 2, 8000) == 16_000
    assert fewest_bytes_per_second("pcm_mulaw", 1, 8000) == 8000
    assert fewest_bytes_per_second("mp3float", 2, 48_000) == 1000  # 8 kbit/s at fewest
    assert longest_for_size(1_000_000, "mp3float", 1, 44_100) == 1000
    assert fewest_bytes_per_second("an-unknown-codec", 1, 8000) == 1.0


def test_a_one_sample_wav_is_audio_and_billed_the_minimum() -> None:
    info = probe(one_sample_wav())
    assert 0 < info.seconds < 0.001
    assert billed_seconds(info.seconds) == 1
    assert billed_seconds(0.0004) == 1
    assert billed_seconds(2.5) == 3


@pytest.mark.parametrize("kind", ["m4a", "webm"])
def test_an_m4a_or_webm_naming_no_known_codec_is_not_audio(kind: str) -> None:
    with pytest.raises(NotAudio) as refused:
        probe(codecless(kind))
    assert isinstance(refused.value, InvalidRequest)
    assert (refused.value.status, refused.value.param) == (400, "file")
    assert "no codec" in refused.value.reason


def test_decoding_stops_when_asked() -> None:
    stop = threading.Event()
    stop.set()
    with pytest.raises(ProbeStopped):
        probe(clip("mp3", 1.0), DecodeBudget(), stop)
