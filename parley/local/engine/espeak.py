"""eSpeak NG through ctypes, from the shared library and voice data ``espeakng-loader`` ships.

The library keeps one synthesizer per process (global state, not thread-safe), so one
``Espeak`` exists per engine process and every call runs on the engine's one speech
thread. ``synthesize`` is synchronous: eSpeak calls back with each piece of 16-bit mono
samples at ``sample_rate`` (22050 Hz) as it makes it, and the sink's answer stops it.

Voices are a language and a variant: ``en-f3`` is eSpeak's ``en-us+f3``; the ids are
``{en,tr}-{m1..m7,f1..f5}``.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from dataclasses import dataclass

AUDIO_OUTPUT_SYNCHRONOUS = 2
BUFFER_MS = 200
POSITION_CHARACTER = 1
CHARS_UTF8 = 1
PARAMETER_RATE = 1
DEFAULT_WORDS_PER_MINUTE = 175
MIN_WORDS_PER_MINUTE = 80
MAX_WORDS_PER_MINUTE = 450

_Callback = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int, ctypes.c_void_p
)
Sink = Callable[[bytes], bool]
"""Takes a piece of samples; returns False to stop the synthesis."""

LANGUAGES = {"en": ("en-us", "English"), "tr": ("tr", "Turkish")}
VARIANTS = tuple(f"m{n}" for n in range(1, 8)) + tuple(f"f{n}" for n in range(1, 6))


@dataclass(frozen=True, slots=True)
class Voice:
    id: str
    language: str
    variant: str

    @property
    def espeak_name(self) -> str:
        return f"{LANGUAGES[self.language][0]}+{self.variant}"

    @property
    def gender(self) -> str:
        return "female" if self.variant.startswith("f") else "male"

    @property
    def name(self) -> str:
        return f"{LANGUAGES[self.language][1]}, {self.gender} {self.variant[1:]}"

    def describe(self) -> dict[str, str]:
        return {"id": self.id, "name": self.name, "language": self.language, "gender": self.gender}


VOICES: dict[str, Voice] = {
    f"{language}-{variant}": Voice(f"{language}-{variant}", language, variant)
    for language in LANGUAGES
    for variant in VARIANTS
}
DEFAULT_VOICE = "en-f2"


class SynthesisError(RuntimeError):
    """eSpeak NG refused to load, to take a voice or to speak."""


def words_per_minute(speed: float) -> int:
    """eSpeak's rate for OpenAI's ``speed`` (1.0 = 175 words a minute), within its range."""
    rate = round(DEFAULT_WORDS_PER_MINUTE * speed)
    return max(MIN_WORDS_PER_MINUTE, min(MAX_WORDS_PER_MINUTE, rate))


class Espeak:
    """The process's one eSpeak NG synthesizer; call it from one thread only."""

    def __init__(self, library_path: str, data_path: str) -> None:
        try:
            self._lib = ctypes.CDLL(library_path)
        except OSError as error:
            raise SynthesisError(f"cannot load eSpeak NG ({error})") from None
        self._declare()
        rate = self._lib.espeak_Initialize(
            AUDIO_OUTPUT_SYNCHRONOUS, BUFFER_MS, data_path.encode(), 0
        )
        if rate <= 0:
            raise SynthesisError(f"eSpeak NG did not start (data at {data_path})")
        self.sample_rate: int = rate
        self._sink: Sink | None = None
        self._callback = _Callback(self._take)  # kept: the library holds only its address
        self._lib.espeak_SetSynthCallback(self._callback)

    @classmethod
    def from_wheel(cls) -> Espeak:
        """The library and voice data of the ``espeakng-loader`` package."""
        import espeakng_loader

        return cls(espeakng_loader.get_library_path(), espeakng_loader.get_data_path())

    def synthesize(self, text: str, voice: Voice, speed: float, sink: Sink) -> None:
        """Speak ``text``; each piece of samples goes to ``sink`` as eSpeak makes it."""
        if self._lib.espeak_SetVoiceByName(voice.espeak_name.encode()) != 0:
            raise SynthesisError(f"eSpeak NG has no voice {voice.espeak_name}")
        self._lib.espeak_SetParameter(PARAMETER_RATE, words_per_minute(speed), 0)
        encoded = text.encode("utf-8")
        self._sink = sink
        try:
            status = self._lib.espeak_Synth(
                encoded, len(encoded) + 1, 0, POSITION_CHARACTER, 0, CHARS_UTF8, None, None
            )
            if status != 0:
                raise SynthesisError(f"eSpeak NG could not speak (status {status})")
            self._lib.espeak_Synchronize()
        finally:
            self._sink = None

    def _take(self, samples: ctypes._Pointer[ctypes.c_short], count: int, _events: int) -> int:
        sink = self._sink
        if sink is None or not samples or count <= 0:
            return 0
        return 0 if sink(ctypes.string_at(samples, count * 2)) else 1

    def _declare(self) -> None:
        lib = self._lib
        lib.espeak_Initialize.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
        lib.espeak_Initialize.restype = ctypes.c_int
        lib.espeak_SetSynthCallback.argtypes = [_Callback]
        lib.espeak_SetSynthCallback.restype = None
        lib.espeak_SetVoiceByName.argtypes = [ctypes.c_char_p]
        lib.espeak_SetVoiceByName.restype = ctypes.c_int
        lib.espeak_SetParameter.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int]
        lib.espeak_SetParameter.restype = ctypes.c_int
        lib.espeak_Synth.argtypes = [
            ctypes.c_char_p,
            ctypes.c_size_t,
            ctypes.c_uint,
            ctypes.c_int,
            ctypes.c_uint,
            ctypes.c_uint,
            ctypes.c_void_p,
            ctypes.c_void_p,
        ]
        lib.espeak_Synth.restype = ctypes.c_int
        lib.espeak_Synchronize.argtypes = []
        lib.espeak_Synchronize.restype = ctypes.c_int
