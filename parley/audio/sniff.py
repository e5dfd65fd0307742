"""Which container a file is, from its first bytes (magic numbers), never its name."""

from __future__ import annotations

from enum import StrEnum
from typing import IO

from parley.audio.errors import EmptyAudio, NotAudio

HEAD_BYTES = 64
ID3_HEADER = 10
MP4_BOXES = (b"ftyp", b"moov", b"mdat", b"free", b"wide", b"skip")


class Container(StrEnum):
    """A supported container; ``demuxer`` is the FFmpeg format PyAV is told to open."""

    WAV = "wav"
    MP3 = "mp3"
    MP4 = "mp4"
    OGG = "ogg"
    WEBM = "webm"
    FLAC = "flac"

    @property
    def demuxer(self) -> str:
        return _DEMUXERS[self]

    @property
    def media_type(self) -> str:
        """The MIME type to send the file under."""
        return _MEDIA_TYPES[self]

    @property
    def extension(self) -> str:
        """The file name extension engines recognise (OpenAI's list)."""
        return "m4a" if self is Container.MP4 else self.value


_DEMUXERS = {
    Container.WAV: "wav",
    Container.MP3: "mp3",
    Container.MP4: "mov",
    Container.OGG: "ogg",
    Container.WEBM: "matroska",
    Container.FLAC: "flac",
}


_MEDIA_TYPES = {
    Container.WAV: "audio/wav",
    Container.MP3: "audio/mpeg",
    Container.MP4: "audio/mp4",
    Container.OGG: "audio/ogg",
    Container.WEBM: "audio/webm",
    Container.FLAC: "audio/flac",
}


def sniff(file: IO[bytes]) -> Container:
    """The container of the seekable ``file``; leaves it at the position it was at."""
    start = file.tell()
    try:
        head = file.read(HEAD_BYTES)
        if not head:
            raise EmptyAudio("the file is empty")
        offset = 0
        while head.startswith(b"ID3") and len(head) >= ID3_HEADER:
            offset += _id3_length(head)
            file.seek(start + offset)
            head = file.read(HEAD_BYTES)
        found = _from_head(head)
        if found is None:
            raise NotAudio("its content matches none of the supported formats")
        return found
    finally:
        file.seek(start)


def _id3_length(head: bytes) -> int:
    """An ID3v2 tag's whole length: header, syncsafe size, and the footer if flagged."""
    size = 0
    for byte in head[6:10]:
        size = (size << 7) | (byte & 0x7F)
    footer = ID3_HEADER if head[5] & 0x10 else 0
    return ID3_HEADER + size + footer


def _from_head(head: bytes) -> Container | None:
    if head[:4] in (b"RIFF", b"RF64") and head[8:12] == b"WAVE":
        return Container.WAV
    if head.startswith(b"fLaC"):
        return Container.FLAC
    if head.startswith(b"OggS"):
        return Container.OGG
    if head.startswith(b"\x1a\x45\xdf\xa3") and (b"webm" in head or b"matroska" in head):
        return Container.WEBM
    if head[4:8] in MP4_BOXES:
        return Container.MP4
    if _is_mpeg_audio_frame(head):
        return Container.MP3
    return None


def _is_mpeg_audio_frame(head: bytes) -> bool:
    """An MPEG-1/2/2.5 layer I-III frame header (ADTS AAC, layer bits 00, is not one)."""
    if len(head) < 4 or head[0] != 0xFF or head[1] & 0xE0 != 0xE0:
        return False
    version = (head[1] >> 3) & 0b11
    layer = (head[1] >> 1) & 0b11
    bitrate = head[2] >> 4
    rate = (head[2] >> 2) & 0b11
    return version != 0b01 and layer != 0 and bitrate != 0b1111 and rate != 0b11
