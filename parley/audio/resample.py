"""Streaming linear resampling of 16-bit mono PCM: a speech engine's rate made the
realtime session's (24 kHz) as its audio arrives (``api/cascade.py``).

Each output sample is the straight line between the two source samples around it; the
position is kept as an exact fraction (``source / target`` a step), so a stream cut into
any pieces gives the same samples as the whole, and ``finish`` gives the last few (held
at the last sample) when the source ends. Nothing here does I/O.
"""

from __future__ import annotations

import sys
from array import array


class Resampler:
    """Feed PCM at ``source`` Hz; get PCM at ``target`` Hz back (little-endian)."""

    __slots__ = ("_odd", "_position", "_samples", "_source", "_target")

    def __init__(self, source: int, target: int) -> None:
        if source <= 0 or target <= 0:
            raise ValueError("sample rates must be positive")
        self._source, self._target = source, target
        self._samples = array("h")
        """Source samples not yet passed (the one before the next output, at least)."""
        self._position = 0
        """The next output's place in ``_samples``, in units of 1/target sample."""
        self._odd = b""

    def feed(self, pcm: bytes) -> bytes:
        data = self._odd + pcm if self._odd else pcm
        cut = len(data) - len(data) % 2
        self._odd = data[cut:]
        incoming = array("h", data[:cut])
        if sys.byteorder == "big":
            incoming.byteswap()
        if self._source == self._target:
            return _little(incoming)
        samples = self._samples
        samples.extend(incoming)
        target, step = self._target, self._source
        position, out = self._position, array("h")
        last = len(samples) - 1
        while position // target < last:
            index, part = divmod(position, target)
            left, right = samples[index], samples[index + 1]
            out.append(left + (right - left) * part // target)
            position += step
        used = position // target
        del samples[:used]
        self._position = position - used * target
        return _little(out)

    def finish(self) -> bytes:
        """The outputs left once the source ends: each at or after the last sample is
        that sample (so ``n`` source samples give ``ceil(n * target / source)``)."""
        samples, out = self._samples, array("h")
        if self._source != self._target and samples:
            last, position = samples[-1], self._position
            while position // self._target < len(samples):
                out.append(last)
                position += self._source
        self._samples, self._position, self._odd = array("h"), 0, b""
        return _little(out)


def _little(samples: array[int]) -> bytes:
    if sys.byteorder == "big":
        samples.byteswap()
    return samples.tobytes()
