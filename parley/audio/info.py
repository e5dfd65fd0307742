"""What ``probe`` found out about a clip."""

from __future__ import annotations

from parley.audio.sniff import Container
from parley.domain.value import value


@value
class AudioInfo:
    container: Container
    codec: str
    sample_rate: int
    channels: int
    seconds: float
    """The measured duration."""

    @property
    def milliseconds(self) -> int:
        return round(self.seconds * 1000)
