"""Converting an engine's audio into the format the caller asked for, as it arrives (PyAV).

``AudioConverter(source, target)`` is fed the engine's pieces and returns what can be sent
already: WAV → PCM drops the header (``wav.WavReader``), PCM → WAV adds a streamed header,
anything → MP3 is encoded by LAME a frame at a time. A compressed source (mp3, flac,
opus) has to be decoded whole, so it is buffered up to ``MAX_BUFFERED`` and converted at
the end. Every failure is an ``AudioError``.

``trim_to_wav`` cuts a reference clip to the length an engine accepts.
"""

from __future__ import annotations

import io
from collections.abc import Iterator

import av

from parley.audio.errors import AudioError
from parley.audio.wav import NotWav, WavReader, wav_header

MAX_BUFFERED = 64 << 20


class _Sink(io.RawIOBase):
    """Where PyAV writes a container; the bytes are taken as they are written."""

    def __init__(self) -> None:
        self._parts: list[bytes] = []

    def writable(self) -> bool:
        return True

    def write(self, data: bytes) -> int:  # type: ignore[override]
        self._parts.append(bytes(data))
        return len(data)

    def take(self) -> bytes:
        data, self._parts = b"".join(self._parts), []
        return data


class Mp3Encoder:
    """16-bit mono PCM in, MP3 out, as it is fed."""

    def __init__(self, rate: int, channels: int = 1) -> None:
        self._sink = _Sink()
        self._rate = rate
        self._layout = "mono" if channels == 1 else "stereo"
        self._block = 2 * channels
        self._odd = b""
        try:
            self._output = av.open(self._sink, mode="w", format="mp3")
            self._stream = self._output.add_stream("libmp3lame", rate=rate)
            self._stream.layout = self._layout
        except av.FFmpegError as error:
            raise AudioError(f"cannot encode mp3 ({error})") from None

    def feed(self, pcm: bytes) -> bytes:
        pcm = self._odd + pcm
        whole = len(pcm) - len(pcm) % self._block
        pcm, self._odd = pcm[:whole], pcm[whole:]
        if pcm:
            frame = av.AudioFrame(format="s16", layout=self._layout, samples=whole // self._block)
            frame.planes[0].update(pcm)
            frame.sample_rate = self._rate
            self._encode(frame)
        return self._sink.take()

    def finish(self) -> bytes:
        self._encode(None)
        self._output.close()
        return self._sink.take()

    def _encode(self, frame: av.AudioFrame | None) -> None:
        try:
            for packet in self._stream.encode(frame):
                self._output.mux(packet)
        except av.FFmpegError as error:
            raise AudioError(f"cannot encode mp3 ({error})") from None


class AudioConverter:
    """One reply's audio from the engine's ``source`` format to the caller's ``target``."""

    def __init__(self, source: str, target: str, *, sample_rate: int) -> None:
        self.source, self.target = source, target
        self._rate = sample_rate
        self._wav = WavReader() if source == "wav" else None
        self._mp3: Mp3Encoder | None = None
        self._started = False
        self._buffered: list[bytes] = []
        self._size = 0

    @property
    def identity(self) -> bool:
        return self.source == self.target

    def feed(self, piece: bytes) -> bytes:
        if self.identity:
            return piece
        if self.source not in ("wav", "pcm"):
            self._size += len(piece)
            if self._size > MAX_BUFFERED:
                raise AudioError("the engine's audio is too long to convert")
            self._buffered.append(piece)
            return b""
        return self._from_pcm(self._pcm(piece))

    def finish(self) -> bytes:
        if self.identity:
            return b""
        tail = b""
        if self._buffered:
            pcm, self._rate = decode_pcm(b"".join(self._buffered))
            tail = self._from_pcm(pcm)
        if self._mp3 is not None:
            return tail + self._mp3.finish()
        if self.target == "mp3" and not self._started:
            return tail + Mp3Encoder(self._rate).finish()
        return tail

    def _pcm(self, piece: bytes) -> bytes:
        if self._wav is None:
            return piece
        try:
            pcm = self._wav.feed(piece)
        except NotWav as error:
            raise AudioError(str(error)) from None
        if self._wav.format is not None:
            self._rate = self._wav.format.rate
        return pcm

    def _from_pcm(self, pcm: bytes) -> bytes:
        if self.target == "pcm" or not pcm:
            return pcm
        if self.target == "wav":
            head = b"" if self._started else wav_header(self._rate)
            self._started = True
            return head + pcm
        if self._mp3 is None:
            self._mp3 = Mp3Encoder(self._rate)
        self._started = True
        return self._mp3.feed(pcm)


def decode_pcm(data: bytes) -> tuple[bytes, int]:
    """Any container's first audio stream as 16-bit mono PCM, and its sample rate."""
    try:
        with av.open(io.BytesIO(data), mode="r") as container:
            stream = container.streams.audio[0]
            rate = stream.rate or stream.codec_context.sample_rate
            resampler = av.AudioResampler(format="s16", layout="mono", rate=rate)
            return b"".join(_resampled(container, resampler)), rate
    except (av.FFmpegError, IndexError) as error:
        raise AudioError(f"the audio cannot be decoded ({type(error).__name__})") from None


def _resampled(
    container: av.container.InputContainer, resampler: av.AudioResampler
) -> Iterator[bytes]:
    for frame in container.decode(audio=0):
        for converted in resampler.resample(frame):
            yield bytes(converted.planes[0])[: converted.samples * 2]
    for converted in resampler.resample(None):
        yield bytes(converted.planes[0])[: converted.samples * 2]


def trim_to_wav(data: bytes, seconds: float) -> bytes:
    """The first ``seconds`` of a clip, as a 16-bit mono WAV."""
    pcm, rate = decode_pcm(data)
    pcm = pcm[: int(seconds * rate) * 2]
    return wav_header(rate, data_size=len(pcm)) + pcm
