"""Images an upstream sends, read into bytes Parley can vouch for.

Whatever the provider, an image comes as base64 in JSON, or as a URL to fetch. Either
way its bytes must be an image of a format Parley serves (PNG, JPEG or WebP, sniffed
from the bytes, never taken from what the upstream says): Parley hands them out under
its own address and content type, so anything else (HTML, a script) is an upstream
failure, never relayed. A URL is fetched without the channel's credentials (a signed
URL carries its own), bounded in size and time, and never handed to the caller.
"""

from __future__ import annotations

import base64
import binascii

from parley.domain.images import sniff_image
from parley.errors import UpstreamError
from parley.http import HttpClient, prepare
from parley.providers.base import Picture, Target, upstream_errors


def unreadable(channel: str, what: str) -> UpstreamError:
    return UpstreamError(f"The upstream channel `{channel}` sent {what}.")


def decoded(channel: str, text: object, revised_prompt: object = None) -> Picture:
    """The image of a base64 string the upstream sent."""
    if not isinstance(text, str):
        raise unreadable(channel, "an image that is not a base64 string")
    try:
        data = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise unreadable(channel, "an image that is not valid base64") from None
    return checked(channel, data, revised_prompt)


def checked(channel: str, data: bytes, revised_prompt: object = None) -> Picture:
    """``data`` as a ``Picture``, once its bytes are those of a PNG, JPEG or WebP."""
    media_type = sniff_image(data[:16])
    if media_type is None:
        raise unreadable(channel, "an image that is not PNG, JPEG or WebP")
    revised = revised_prompt if isinstance(revised_prompt, str) else None
    return Picture(data, media_type, revised)


async def fetched(
    http: HttpClient, target: Target, url: object, limit: int, revised_prompt: object = None
) -> Picture:
    """The image at ``url`` (an upstream's reply named it), at most ``limit`` bytes,
    fetched within the channel's timeouts and without its credentials."""
    channel = target.channel
    if not isinstance(url, str) or not url.startswith(("https://", "http://")):
        raise unreadable(channel, "an image URL that is not http(s)")
    with upstream_errors(channel):
        try:
            head = prepare("GET", url, {"Accept": "image/*"}, encoded=True)
        except ValueError:
            raise unreadable(channel, "an image URL Parley cannot fetch") from None
        reply = await http.send(
            head, b"", connect_timeout=target.connect_timeout, read_timeout=target.read_timeout
        )
        data = await reply.read(limit)
    if reply.status != 200:
        raise UpstreamError(
            f"The upstream channel `{channel}` named an image that could not be fetched "
            f"(status {reply.status})."
        )
    return checked(channel, data, revised_prompt)
