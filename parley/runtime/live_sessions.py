"""The realtime sessions open in this process, counted per public model, for
``/metrics`` (``parley_realtime_sessions``)."""

from __future__ import annotations

from collections import Counter


class LiveSessions:
    __slots__ = ("_open",)

    def __init__(self) -> None:
        self._open: Counter[str] = Counter()

    def opened(self, model: str) -> None:
        self._open[model] += 1

    def closed(self, model: str) -> None:
        self._open[model] -= 1

    def by_model(self) -> dict[str, int]:
        """Open sessions per model (0 for a model whose sessions all ended)."""
        return dict(self._open)

    def __len__(self) -> int:
        return sum(self._open.values())
