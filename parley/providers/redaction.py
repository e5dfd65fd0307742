"""Taking credentials out of text an upstream wrote, before a caller may see it.

An upstream's error message is relayed when the request itself was at fault, and some
upstreams (or the proxies in front of them) echo the request's headers in it. Removed:
the channel's own key in every spelling a message can carry it, and anything shaped like
a credential: an ``Authorization``-style header's value (``x-api-key``, ElevenLabs'
``xi-api-key`` among them), a bearer token, a Deepgram ``Token`` (a run of 32 or more
hexadecimal digits after the word), an ``sk-``-style key, ElevenLabs' and Cartesia's
``sk_`` and ``sk_car_`` keys, a JWT.

The key's spellings: as is; with any of its ASCII characters percent-encoded (once or
twice, either case), escaped as JSON's ``\\u00XX`` or written as invisible Unicode tag
characters; with whitespace or characters that print as nothing between any two of its
characters; and in base64, standard or URL-safe, at any of the three alignments it may
have inside what was encoded (a ``Basic`` header's ``user:key``), spelled in any of
those ways too, where the whole base64 run holding it goes. Each is found in a reading
of the text with those disguises undone, tag characters read as ASCII and then dropped
like gaps (``_without_secret``), in time linear in the text; nothing is kept per key.

A key cut into pieces (other words between them) or written backwards is found too: in
that reading, any run of ``MIN_SECRET_RUN`` or more characters that stands in the key, or
in the key reversed, is removed (``_Runs``), so at most a fragment shorter than that is
left of a key however it is cut up.
"""

from __future__ import annotations

import base64
import re

REDACTED = "[redacted]"
MIN_SECRET_CHARS = 4
"""A configured key shorter than this is not searched for literally (it would mangle
ordinary words); the shapes below still apply."""
MIN_SECRET_RUN = 12
"""The shortest piece of a key (in order, forwards or backwards) removed wherever it
stands: too long to turn up in ordinary text by chance, short enough that what is left
of a key cut into pieces gives little of it away."""
_HALF_RUN = MIN_SECRET_RUN // 2
MIN_BASE64_RUN = 8
"""The shortest stretch of base64 searched for as the key's: a shorter one (from a key of
under seven bytes) would turn up in ordinary text by chance."""

_CREDENTIALS = re.compile(
    r"""
    (?P<name>\b(?:proxy-)?authorization|\bx-api-key|\bapi[-_]?key|\bx-goog-api-key)
    (?P<sep>["']?\s*[:=]\s*["']?)
    (?:(?:bearer|basic|token)\s+)?[^\s"',;}]+
  | \bbearer\s+[A-Za-z0-9._~+/=-]{6,}
  | \btoken\s+[A-Fa-f0-9]{32,}\b
  | \b(?:sk|rk|pk)-[A-Za-z0-9_-]{8,}
  | \bsk_(?:car_)?[A-Za-z0-9]{16,}
  | \beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*
    """,
    re.IGNORECASE | re.VERBOSE,
)
_GAP_CODES = """
    0009-000D 001C-0020 0085 00A0 1680 2000-200A 2028-2029 202F 205F 3000
    00AD 0600-0605 061C 06DD 070F 0890-0891 08E2 180E 200B-200F 202A-202E 2060-2064
    2066-206F FEFF FFF9-FFFB 110BD 110CD 13430-13438 1BCA0-1BCA3 1D173-1D17A E0001 E007F
    034F 115F-1160 17B4-17B5 180B-180D 180F 2800 3164 FE00-FE0F FFA0 E0100-E01EF
"""
"""What may stand between a key's characters, as code points: whitespace (the first
line), every format character (the next two), and the others that print as nothing
(variation selectors, fillers, a blank braille pattern)."""
_GAPS = tuple(
    (int(first, 16), int(last or first, 16))
    for first, _, last in (codes.partition("-") for codes in _GAP_CODES.split())
)
TAGS = (0xE0020, 0xE007E)
TAG_OFFSET = 0xE0000
"""Unicode tag characters (``TAGS``) mirror ASCII this far up, unseen."""
_DISGUISES = re.compile(
    "(?P<gap>[{}]+)".format("".join(rf"\U{a:08x}-\U{b:08x}" for a, b in _GAPS))
    + r"|%(?:25)?(?P<percent>[0-7][0-9A-Fa-f])"
    + r"|\\u00(?P<escape>[0-7][0-9A-Fa-f])"
    + r"|(?P<tag>[\U{:08x}-\U{:08x}])".format(*TAGS)
)
"""What may disguise a key's characters: a gap, an ASCII character percent-encoded or
escaped, or one written as an invisible Unicode tag character."""
_GAP_TABLE = {code: None for first, last in _GAPS for code in range(first, last + 1)}
_TAG_CODES = range(TAGS[0], TAGS[1] + 1)
_UNSEEN: dict[bool, dict[int, int | None]] = {
    True: {**_GAP_TABLE, **{code: code - TAG_OFFSET for code in _TAG_CODES}},
    False: {**_GAP_TABLE, **dict.fromkeys(_TAG_CODES)},
}
"""``str.translate``'s tables for the gaps (dropped) and the tag characters: read as
the ASCII they mirror (``True``), or dropped like gaps (``False``)."""
_ESCAPED = re.compile(r"%(?:25)?([0-7][0-9A-Fa-f])|\\u00([0-7][0-9A-Fa-f])")
_BASE64_CHARACTERS = frozenset(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/_-="
)


def redact(text: str, secret: str | None) -> str:
    """``text`` without ``secret`` in any of its spellings, and without anything shaped
    like a credential."""
    if secret and len(secret) >= MIN_SECRET_CHARS:
        text = _without_secret(text, secret)
    return _CREDENTIALS.sub(_replacement, text)


def _without_secret(text: str, secret: str) -> str:
    """``text`` with every spelling of ``secret`` replaced. The text is read with its
    disguises undone (gaps dropped, escapes decoded); where the key, or a base64 run of
    it, shows in that reading, the reading is made again remembering where each of its
    characters came from, and each occurrence is replaced where it came from (for
    base64, with the rest of the run it is part of)."""
    if secret in text:
        text = text.replace(secret, REDACTED)
    needles = (secret, *_base64_cores(secret.encode()))
    runs = _Runs(secret)
    for tags_read in (True, False):
        text = _without_needles(text, needles, runs, tags_read)
    return text


class _Runs:
    """Where pieces of a key stand in a text: runs of ``MIN_SECRET_RUN`` characters or
    more that are in the key, or in the key reversed.

    Every window of that length of the key (both ways) is kept, and every half of one.
    The text is probed for a half only where a half's length divides the position; a
    window of the text holds one such probe, so none is missed, and only around a half
    found are the windows holding it looked up: time linear in the text."""

    def __init__(self, secret: str) -> None:
        words = (secret, secret[::-1])
        self.windows = frozenset(
            word[start : start + MIN_SECRET_RUN]
            for word in words
            for start in range(len(word) - MIN_SECRET_RUN + 1)
        )
        self.halves = frozenset(
            word[start : start + _HALF_RUN]
            for word in words
            for start in range(len(word) - _HALF_RUN + 1)
        )

    def spans(self, reading: str) -> list[tuple[int, int]]:
        """The runs in ``reading``, in order, each run's windows merged into one span."""
        spans: list[tuple[int, int]] = []
        if not self.windows:
            return spans
        for probe in range(0, len(reading) - _HALF_RUN + 1, _HALF_RUN):
            if reading[probe : probe + _HALF_RUN] not in self.halves:
                continue
            for start in range(max(0, probe - _HALF_RUN), probe + 1):
                if reading[start : start + MIN_SECRET_RUN] not in self.windows:
                    continue
                if spans and start <= spans[-1][1]:
                    spans[-1] = (spans[-1][0], start + MIN_SECRET_RUN)
                else:
                    spans.append((start, start + MIN_SECRET_RUN))
        return spans


def _without_needles(text: str, needles: tuple[str, ...], runs: _Runs, tags_read: bool) -> str:
    """``_without_secret`` for one way of taking tag characters (``_UNSEEN``); the first
    needle is the key, the others its base64 runs; ``runs`` finds pieces of the key."""
    quick = _unseen_undone(text, tags_read)
    if not any(needle in quick for needle in needles) and not runs.spans(quick):
        return text
    reading, starts, ends = _read(text, tags_read)
    spans = [(starts[begin], ends[end - 1]) for begin, end in runs.spans(reading)]
    for index, needle in enumerate(needles):
        found = reading.find(needle)
        while found >= 0:
            span = starts[found], ends[found + len(needle) - 1]
            spans.append(_whole_run(text, *span) if index else span)
            found = reading.find(needle, found + len(needle))
    return _replaced(text, sorted(spans))


def _unseen_undone(text: str, tags_read: bool) -> str:
    """``text`` read as ``_read`` reads it, without keeping where its characters came
    from: quicker, for the texts (nearly all) in which the key does not show."""
    text = text.translate(_UNSEEN[tags_read])
    if "%" in text or "\\" in text:
        text = _ESCAPED.sub(_unescaped, text)
    return text


def _unescaped(match: re.Match[str]) -> str:
    return chr(int(match.group(1) or match.group(2), 16))


def _read(text: str, tags_read: bool) -> tuple[str, list[int], list[int]]:
    """``text`` with its disguises undone, and where in ``text`` each character of that
    reading begins and ends."""
    plain: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    done = 0
    for match in _DISGUISES.finditer(text):
        begin, end = match.span()
        plain.append(text[done:begin])
        starts.extend(range(done, begin))
        ends.extend(range(done + 1, begin + 1))
        character = _undisguised(match, tags_read)
        if character:
            plain.append(character)
            starts.append(begin)
            ends.append(end)
        done = end
    plain.append(text[done:])
    starts.extend(range(done, len(text)))
    ends.extend(range(done + 1, len(text) + 1))
    return "".join(plain), starts, ends


def _undisguised(match: re.Match[str], tags_read: bool) -> str:
    """What a disguise stands for: nothing for a gap, else the character it encodes."""
    code = match.group("percent") or match.group("escape")
    if code is not None:
        return chr(int(code, 16))
    tag = match.group("tag")
    return chr(ord(tag) - TAG_OFFSET) if tag is not None and tags_read else ""


def _whole_run(text: str, begin: int, end: int) -> tuple[int, int]:
    """The span ``begin:end`` of ``text`` widened to the base64 characters around it."""
    while begin > 0 and text[begin - 1] in _BASE64_CHARACTERS:
        begin -= 1
    while end < len(text) and text[end] in _BASE64_CHARACTERS:
        end += 1
    return begin, end


def _replaced(text: str, spans: list[tuple[int, int]]) -> str:
    """``text`` with each of ``spans`` (in order, perhaps overlapping) replaced."""
    pieces: list[str] = []
    done = 0
    for begin, end in spans:
        if end <= done:
            continue
        pieces += [text[done : max(begin, done)], REDACTED]
        done = end
    return "".join(pieces) + text[done:]


def _base64_cores(secret: bytes) -> tuple[str, ...]:
    """The base64 characters that depend on ``secret`` alone, for each of the three
    offsets it may start at within the encoded bytes, in both alphabets; none for a key
    too short to give runs of ``MIN_BASE64_RUN``."""
    cores: list[str] = []
    for offset in range(3):
        encoded = base64.b64encode(bytes(offset) + secret).decode()
        core = encoded[-(-8 * offset // 6) : 8 * (offset + len(secret)) // 6]
        if len(core) < MIN_BASE64_RUN:
            return ()
        cores += [core, core.replace("+", "-").replace("/", "_")]
    return tuple(cores)


def _replacement(match: re.Match[str]) -> str:
    name = match.group("name")
    if name is None:
        return REDACTED
    return f"{name}{match.group('sep')}{REDACTED}"
