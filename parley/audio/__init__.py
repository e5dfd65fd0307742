"""Audio a caller uploads or an engine returns: what container it is and how long it lasts.

``sniff`` names the container from the bytes (never from a file name); ``probe`` also
measures the duration with PyAV by decoding, so a header's claim (a streamed WAV's
placeholder sizes, a truncated MP3's Xing frame count) never decides what is billed.
Both raise ``NotAudio`` (``EmptyAudio`` for nothing to measure), which the API renders as
a 400 naming the ``file`` field.
"""

from parley.audio.errors import EmptyAudio, NotAudio
from parley.audio.info import AudioInfo
from parley.audio.probe import AudioSource, pcm_seconds, probe
from parley.audio.sniff import Container, sniff

__all__ = [
    "AudioInfo",
    "AudioSource",
    "Container",
    "EmptyAudio",
    "NotAudio",
    "pcm_seconds",
    "probe",
    "sniff",
]
