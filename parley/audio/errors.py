"""The two ways audio is refused, both the caller's fault (400, ``param: file``), and
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


class AudioError(ValueError):
    """Audio that cannot be read or converted (``parley.audio.convert``)."""
