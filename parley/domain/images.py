"""Images as a kind of model: their media types, sizes, qualities and grades, and the
token counts Parley estimates for them. Pure, no I/O.

A **grade** is what an image is priced by: its size and quality, ``"1024x1024/high"``.
Either part may be ``auto`` (the caller left it to the model), and a price table entry
may name ``*`` for any value (``domain/pricing.py`` looks grades up).

The output token estimates follow OpenAI's published counts for GPT image models (a
1024x1024 image is 272 tokens at ``low``, 1056 at ``medium`` and 4160 at ``high``,
proportional to the pixels): they are what a token-priced model is billed when its
upstream reports no usage, and what a stream of them reserves against the token rates.
The ceiling per image (``output_ceiling``) is well above any of them, so that a report
past it is not believed (``Allowance.cap``).
"""

from __future__ import annotations

import re

from parley.domain.value import value

MEDIA_TYPES = {"png": "image/png", "jpeg": "image/jpeg", "webp": "image/webp"}
"""The formats Parley accepts and serves, by ``output_format`` name."""
FORMATS = {media: name for name, media in MEDIA_TYPES.items()}
QUALITIES = frozenset({"auto", "standard", "hd", "low", "medium", "high"})
AUTO = "auto"
ANY = "*"
SIZE = re.compile(r"^([1-9][0-9]{1,4})x([1-9][0-9]{1,4})$")
MAX_SIDE = 16_384
AUTO_PIXELS = 2048 * 2048
"""The pixels an image of ``size: auto`` is taken to have at most (GPT image models choose
up to 1536x1024; 2048x2048 leaves room for newer ones)."""
PIXELS_PER_TOKEN = {"low": 3855, "medium": 993, "high": 252}
"""OpenAI's output tokens for GPT image models: a 1024x1024 image is 272, 1056, 4160."""
CEILING_PIXELS_PER_TOKEN = 64
"""Pixels per output token no upstream goes below (four times ``high``'s count)."""


def sniff_image(head: bytes) -> str | None:
    """The media type of an image from its first bytes (magic numbers), never its name:
    ``image/png``, ``image/jpeg`` or ``image/webp``; ``None`` for anything else."""
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return None


def is_size(text: str) -> bool:
    """Whether ``text`` is ``auto`` or ``WxH`` with sides up to ``MAX_SIDE``."""
    if text == AUTO:
        return True
    found = SIZE.match(text)
    return found is not None and all(int(side) <= MAX_SIDE for side in found.groups())


def pixels(size: str) -> int:
    """An image's pixels at ``size`` (``WxH``), or the most ``auto`` can be."""
    found = SIZE.match(size)
    if found is None:
        return AUTO_PIXELS
    width, height = found.groups()
    return int(width) * int(height)


@value
class Grade:
    """What one image is priced by: its size and quality (``auto`` when not chosen)."""

    size: str = AUTO
    quality: str = AUTO

    def __str__(self) -> str:
        return f"{self.size}/{self.quality}"

    def settled(self, size: object, quality: object) -> Grade:
        """This grade with its ``auto`` parts filled from what the upstream said it made
        (a part already chosen by the caller stays: it is what admission held for)."""
        made_size = size if isinstance(size, str) and is_size(size) else self.size
        made_quality = quality if isinstance(quality, str) and quality in QUALITIES else None
        return Grade(
            made_size if self.size == AUTO else self.size,
            made_quality or self.quality if self.quality == AUTO else self.quality,
        )


def parse_grade(text: str) -> Grade:
    """A grade from its string (``"1024x1024/high"``, ``"auto/auto"``, ``""``)."""
    size, _, quality = text.partition("/")
    return Grade(size or AUTO, quality or AUTO)


def estimated_output_tokens(grade: Grade) -> int:
    """Output tokens of one image of ``grade``, by OpenAI's published counts (``auto``
    and the DALL·E qualities count as ``high``)."""
    per_token = PIXELS_PER_TOKEN.get(grade.quality, PIXELS_PER_TOKEN["high"])
    return -(-pixels(grade.size) // per_token)


def output_ceiling(grade: Grade) -> int:
    """The most output tokens one image of ``grade`` is believed to take."""
    return -(-pixels(grade.size) // CEILING_PIXELS_PER_TOKEN)


def nearest_ratio(size: str | None, ratios: tuple[str, ...]) -> str | None:
    """Of ``ratios`` (``"16:9"``...), the one nearest ``size``'s; ``None`` for ``auto``."""
    found = SIZE.match(size or "")
    if found is None:
        return None
    width, height = (int(side) for side in found.groups())

    def distance(ratio: str) -> float:
        across, down = ratio.split(":")
        return abs(int(across) / int(down) - width / height)

    return min(ratios, key=distance)
