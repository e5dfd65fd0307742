"""The ways a careless upstream may spell a channel's key in an error message, and a check
that reads text back for any of them without Parley's redactor.

``spellings(key)`` names each form (``percent``, ``basic``, ``zero_width``, ``split`` by
other words, ``reversed``...): the fake engine's ``leak-<name>`` knob echoes the key in
it. ``exposes(text, key)`` undoes every one of those disguises its own way (``urllib``'s
unquoting, ``base64``'s decoders at each alignment, Unicode categories) and says whether
the key, or a long enough piece of it either way round, shows.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import re
import unicodedata
import urllib.parse

TAG_OFFSET = 0xE0000
INVISIBLE = "\u00ad\u034f\u200b\u200c\u200d\u2060\ufe0f\ufeff\u3164"
"""Characters that print as nothing, beyond the format ones (``Cf``)."""


def spellings(key: str) -> dict[str, str]:
    """``key`` written every way a relayed message may carry it."""
    raw = key.encode()
    basic = base64.b64encode(b"user:" + raw).decode()
    return {
        "literal": key,
        "percent": "".join(f"%{byte:02X}" for byte in raw),
        "percent_lower": "".join(f"%{byte:02x}" for byte in raw),
        "percent_twice": "".join(f"%25{byte:02X}" for byte in raw),
        "percent_some": "".join(
            f"%{byte:02X}" if index % 3 == 0 else chr(byte) for index, byte in enumerate(raw)
        ),
        "json_escaped": "".join(f"\\u{byte:04x}" for byte in raw),
        "spaced": " ".join(key),
        "zero_width": "\u200b".join(key),
        "invisible_mix": "".join(c + INVISIBLE[i % len(INVISIBLE)] for i, c in enumerate(key)),
        "tags": "".join(chr(TAG_OFFSET + ord(c)) for c in key),
        "base64": base64.b64encode(raw).decode(),
        "basic": f"Basic {basic}",
        "basic_wrapped": f"Basic {basic[:16]}\n{basic[16:]}",
        "basic_quoted": urllib.parse.quote(f"Basic {basic}", safe=""),
        "base64_url_offset": base64.urlsafe_b64encode(b"k=" + raw + b";").decode(),
        "split": f"{key[:10]} then {key[10:]}",
        "split_thrice": f"{key[:10]}, then {key[10:22]}, and {key[22:]}",
        "reversed": key[::-1],
        "reversed_split": f"{key[::-1][:12]} / {key[::-1][12:]}",
    }


RUN = 12
"""The shortest piece of a key, forwards or backwards, that gives it away."""


def exposes(text: str, key: str) -> bool:
    """Whether ``text`` gives ``key`` away in any of its ``spellings``: whole, or a piece
    of ``RUN`` characters or more of it (or of it reversed) in any reading."""
    readings = _readings(text)
    if any(key in reading for reading in readings):
        return True
    pieces = {
        word[start : start + RUN]
        for word in (key, key[::-1])
        for start in range(len(word) - RUN + 1)
    }
    if any(piece in reading for piece in pieces for reading in readings):
        return True
    secret = key.encode()
    return any(secret in decoded for reading in readings for decoded in _base64_decodings(reading))


def _readings(text: str) -> set[str]:
    untagged = "".join(
        chr(ord(c) - TAG_OFFSET) if 0xE0020 <= ord(c) <= 0xE007E else c for c in text
    )
    seen = "".join(
        c
        for c in untagged
        if not (c.isspace() or c in INVISIBLE or unicodedata.category(c) == "Cf")
    )
    readings = {text, seen}
    for reading in list(readings):
        once = urllib.parse.unquote(reading)
        readings |= {once, urllib.parse.unquote(once)}
    for reading in list(readings):
        readings.add(re.sub(r"\\u([0-9a-fA-F]{4})", lambda m: chr(int(m.group(1), 16)), reading))
    return readings


def _base64_decodings(text: str) -> list[bytes]:
    decoded: list[bytes] = []
    for run in re.findall(r"[A-Za-z0-9+/_=-]{8,}", text):
        for start in range(4):
            body = run[start:].rstrip("=")
            body = body[: len(body) - 1] if len(body) % 4 == 1 else body
            body += "=" * (-len(body) % 4)
            for decode in (base64.b64decode, base64.urlsafe_b64decode):
                with contextlib.suppress(binascii.Error, ValueError):
                    decoded.append(decode(body))
    return decoded
