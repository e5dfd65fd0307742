"""The energy voice detector (``audio.vad``): where turns start and stop, on PCM16."""

from __future__ import annotations

import math
from array import array

import pytest

from parley.audio.vad import FRAME_MS, Speech, VoiceDetector

RATE = 24_000


def tone(ms: int, amplitude: int = 8000) -> bytes:
    count = RATE * ms // 1000
    return array("h", (int(amplitude * math.sin(i * 0.06)) for i in range(count))).tobytes()


def quiet(ms: int) -> bytes:
    return b"\0\0" * (RATE * ms // 1000)


def test_a_turn_starts_with_its_prefix_and_stops_after_the_silence() -> None:
    detector = VoiceDetector(threshold=0.5, prefix_padding_ms=300, silence_duration_ms=500)
    found = detector.feed(quiet(1000) + tone(800) + quiet(600))
    assert found == [Speech(True, 1000 - 300), Speech(False, 1800)]
    assert not detector.speaking


def test_a_pause_shorter_than_the_silence_is_one_turn() -> None:
    detector = VoiceDetector(silence_duration_ms=500, prefix_padding_ms=0)
    found = detector.feed(tone(300) + quiet(400) + tone(300) + quiet(500))
    assert found == [Speech(True, 0), Speech(False, 1000)]


def test_positions_hold_however_the_audio_is_cut() -> None:
    audio = quiet(200) + tone(500) + quiet(700)
    whole = VoiceDetector().feed(audio)
    pieces = VoiceDetector()
    found: list[Speech] = []
    for start in range(0, len(audio), 777):  # odd sizes: frames and samples split
        found += pieces.feed(audio[start : start + 777])
    assert found == whole == [Speech(True, 0), Speech(False, 700)]


def test_a_click_is_not_speech() -> None:
    detector = VoiceDetector()
    assert detector.feed(quiet(100) + tone(2 * FRAME_MS) + quiet(1000)) == []


@pytest.mark.parametrize(("threshold", "heard"), [(0.2, True), (0.9, False)])
def test_the_threshold_asks_for_a_louder_voice(threshold: float, heard: bool) -> None:
    detector = VoiceDetector(threshold=threshold, prefix_padding_ms=0)
    found = detector.feed(tone(500, amplitude=1500) + quiet(800))  # about -30 dBFS
    assert bool(found) is heard


def test_reset_forgets_a_turn_and_skip_keeps_positions() -> None:
    detector = VoiceDetector(prefix_padding_ms=0)
    assert detector.feed(tone(200)) == [Speech(True, 0)]
    detector.reset()
    assert detector.feed(quiet(1000)) == []  # no stop for a forgotten turn
    detector.skip(len(quiet(500)))
    assert detector.heard_ms == 1700
    assert detector.feed(tone(100)) == [Speech(True, 1700)]
