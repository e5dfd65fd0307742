"""How audio is refused, always the caller's fault (400, ``param: file``), and
``AudioError``, audio an engine sent that cannot be converted.

Nothing here imports PyAV: the modules that do (``convert``, ``decode``) are loaded on
the first call that needs them, and callers catch these errors without loading them."""

from __future__ import annotations

from parley.errors import InvalidRequest

SUPPORTED = "flac, m4a, mp3, mp4, mpeg, mpga, oga, ogg, opus, wav, webm"


class NotAudio(InvalidRequest):
    """The bytes are not a supported audio container, or cannot be decoded."""

    code = "invalid_audio"

    def __init__(self, reason: str) -> None:
        super().__init__(
            f"The file is not audio Parley can read: {reason}. Supported formats: {SUPPORTED}.",
            param="file",
        )
        self.reason = reason


class EmptyAudio(NotAudio):
    """The file is empty, or its audio lasts zero seconds."""

    code = "empty_audio"


class AudioTooLong(InvalidRequest):
    """The clip lasts longer than Parley accepts (``audio.max_seconds``)."""

    code = "audio_too_long"

    def __init__(self, limit: float) -> None:
        super().__init__(
            f"The audio lasts more than {limit:g} seconds, the longest Parley accepts. "
            "Send a shorter clip.",
            param="file",
        )


class AudioTooCostly(InvalidRequest):
    """Measuring the clip takes more CPU time than one upload may
    (``audio.decode_cpu_seconds``): far more or far smaller frames than real audio has."""

    code = "audio_too_costly"

    def __init__(self, limit: float) -> None:
        super().__init__(
            f"The audio takes more than {limit:.1f} seconds of CPU to decode. "
            "Re-encode it with a common encoder, or send a shorter clip.",
            param="file",
        )


class ProbeStopped(Exception):
    """Measuring stopped because nobody waits for it any more (the caller left,
    or the server is shutting down); never seen by a caller."""


class AudioError(ValueError):
    """Audio that cannot be read or converted (``parley.audio.convert``)."""
