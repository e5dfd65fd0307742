"""Streamed text cut into sentences, so a cascade speaks an answer while it is still
being written (``api/cascade.py``): each sentence goes to the speech model as soon
as its end is seen.

A sentence ends at ``.``, ``!``, ``?`` or ``…`` (any run of them, and closing quotes or
brackets after) followed by white space, or at a line break. A run longer than
``LONGEST`` characters without an end is cut at its last comma or space, so a model that
never stops a sentence is still spoken before it finishes.
"""

from __future__ import annotations

import re

LONGEST = 200
_END = re.compile(r"[.!?…]+[\"')\]]*\s+|\n+")


class Sentences:
    """Fed text as it streams; returns each sentence once it is complete."""

    __slots__ = ("_text",)

    def __init__(self) -> None:
        self._text = ""

    def feed(self, text: str) -> list[str]:
        self._text += text
        found: list[str] = []
        while True:
            end = _END.search(self._text)
            if end is None:
                break
            found.append(self._text[: end.end()])
            self._text = self._text[end.end() :]
        while len(self._text) > LONGEST:
            head = self._text[:LONGEST]
            cut = max(head.rfind(", "), head.rfind(" "))
            cut = cut + 1 if cut > 0 else LONGEST
            found.append(self._text[:cut])
            self._text = self._text[cut:]
        return [sentence for sentence in (s.strip() for s in found) if sentence]

    def rest(self) -> str:
        """What is left when the text ends (a last sentence without its stop)."""
        rest, self._text = self._text.strip(), ""
        return rest
