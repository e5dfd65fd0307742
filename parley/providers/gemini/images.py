"""Images from Google's models, on the Gemini API (``type: gemini``) and Vertex AI
(``type: vertex``), through either's ``Endpoint``.

Two kinds of model, told apart by the upstream model's name:

- **Imagen** (``imagen-*``): ``:predict`` with ``{"instances": [{"prompt"}],
  "parameters": {"sampleCount", "aspectRatio"?, "outputOptions"?: {"mimeType",
  "compressionQuality"?}}}``; the reply's ``predictions[]`` each carry
  ``bytesBase64Encoded`` and ``mimeType`` (and ``prompt``, when Imagen rewrote it).
  A prediction filtered for safety has ``raiFilteredReason`` and no bytes: it is left
  out (fewer images than ``n``, billed as made); none at all is a 400 relaying the
  reason. Imagen reports no usage. Edits are not Imagen's here (a 400).
- **Gemini image output** (any other, ``gemini-2.5-flash-image``...):
  ``:generateContent`` with the prompt (and an edit's images as ``inlineData`` parts)
  as one user turn and ``generationConfig.responseModalities: ["TEXT", "IMAGE"]``; the
  images are the reply's ``inlineData`` parts, the usage its ``usageMetadata`` (image
  input tokens from ``promptTokensDetails``), given back in OpenAI's shape. One image a
  call: ``n`` above 1 is a 400, as is a ``mask`` (Gemini edits by instruction).

``size`` becomes the nearest ``aspectRatio`` Google takes (``RATIOS``). What Google's API
cannot say is a 400 naming the field, never dropped: ``quality`` and ``background``
other than ``auto``, ``style``, ``moderation``, ``input_fidelity``, and an
``output_format`` other than PNG or JPEG (Imagen) or any (Gemini). ``user`` and
``safety_identifier`` are the caller's labels, not part of the image, and are not sent.
Neither streams images: a stream is the whole reply as its only event.
"""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

from parley.domain.images import nearest_ratio, sniff_image
from parley.domain.wire import JSON
from parley.errors import InvalidRequest, UpstreamError
from parley.http import HttpClient
from parley.providers.base import (
    ImageEvent,
    ImageReply,
    ImageRequest,
    Picture,
    ReplyBounds,
    Target,
)
from parley.providers.gemini.adapter import Endpoint, endpoint_reply
from parley.providers.pictures import decoded

RATIOS = ("1:1", "3:4", "4:3", "9:16", "16:9")
IMAGEN_TYPES = {"png": "image/png", "jpeg": "image/jpeg"}
LABELS = ("user", "safety_identifier")
"""The caller's own labels: not sent (Google's APIs have no field for them)."""


class GoogleImages:
    """``Images`` for Imagen and Gemini image models, over one ``Endpoint``."""

    __slots__ = ("_bounds", "_endpoint", "_http")

    def __init__(self, http: HttpClient, bounds: ReplyBounds | None, endpoint: Endpoint) -> None:
        self._http = http
        self._bounds = bounds or ReplyBounds()
        self._endpoint = endpoint

    async def images(self, target: Target, request: ImageRequest) -> ImageReply:
        _refuse_unsayable(request)
        if target.model.rpartition("/")[2].startswith("imagen"):
            reply = await self._call(target, "predict", imagen_request(request))
            return imagen_reply(target.channel, reply)
        reply = await self._call(target, "generateContent", gemini_request(request))
        return gemini_reply(target.channel, reply)

    @asynccontextmanager
    async def images_stream(
        self, target: Target, request: ImageRequest
    ) -> AsyncIterator[AsyncIterator[Sequence[ImageEvent]]]:
        reply = await self.images(target, request)
        yield _once(reply)

    async def _call(self, target: Target, method: str, payload: JSON) -> JSON:
        return await endpoint_reply(
            self._http,
            self._endpoint,
            target,
            method,
            payload,
            bounds=self._bounds,
            secret=target.api_key,
        )


async def _once(reply: ImageReply) -> AsyncIterator[Sequence[ImageEvent]]:
    yield (reply,)


def _refuse_unsayable(request: ImageRequest) -> None:
    for name in ("quality", "background"):
        if getattr(request, name) not in (None, "auto"):
            raise InvalidRequest(
                f"This model's upstream (Google) has no '{name}'; omit it or send auto.",
                param=name,
            )
    for name, _ in request.options:
        if name not in LABELS:
            raise InvalidRequest(f"This model's upstream (Google) has no '{name}'.", param=name)


def imagen_request(request: ImageRequest) -> JSON:
    if request.edit:
        raise InvalidRequest(
            "Imagen models here generate only; edit with a Gemini image model.", param="image"
        )
    parameters: JSON = {"sampleCount": request.n}
    ratio = nearest_ratio(request.size, RATIOS)
    if ratio is not None:
        parameters["aspectRatio"] = ratio
    if request.output_format is not None:
        media_type = IMAGEN_TYPES.get(request.output_format)
        if media_type is None:
            raise InvalidRequest(
                "Imagen writes png or jpeg; send one of those.", param="output_format"
            )
        options: JSON = {"mimeType": media_type}
        if request.output_compression is not None:
            options["compressionQuality"] = request.output_compression
        parameters["outputOptions"] = options
    return {"instances": [{"prompt": request.prompt}], "parameters": parameters}


def imagen_reply(channel: str, reply: JSON) -> ImageReply:
    predictions = reply.get("predictions")
    pictures: list[Picture] = []
    filtered: list[str] = []
    for prediction in predictions if isinstance(predictions, list) else ():
        if not isinstance(prediction, dict):
            continue
        if "bytesBase64Encoded" in prediction:
            revised = prediction.get("prompt")
            pictures.append(decoded(channel, prediction["bytesBase64Encoded"], revised))
        elif isinstance(prediction.get("raiFilteredReason"), str):
            filtered.append(prediction["raiFilteredReason"][:300])
    if not pictures:
        if filtered:
            raise InvalidRequest(
                f"The upstream refused the prompt: {filtered[0]}",
                param="prompt",
                code="content_policy_violation",
            )
        raise UpstreamError(f"The upstream channel `{channel}` sent no images.")
    return ImageReply(tuple(pictures))


def gemini_request(request: ImageRequest) -> JSON:
    if request.n != 1:
        raise InvalidRequest("Gemini image models make one image a call; send n=1.", param="n")
    if request.mask is not None:
        raise InvalidRequest(
            "Gemini image models edit by instruction and take no mask; describe the change "
            "in the prompt.",
            param="mask",
        )
    if request.output_format is not None or request.output_compression is not None:
        param = "output_format" if request.output_format is not None else "output_compression"
        raise InvalidRequest("Gemini image models choose their own output format.", param=param)
    parts: list[JSON] = [{"text": request.prompt}]
    for image in request.inputs:
        data = base64.b64encode(image.data).decode()
        parts.append({"inlineData": {"mimeType": image.media_type, "data": data}})
    config: JSON = {"responseModalities": ["TEXT", "IMAGE"]}
    ratio = nearest_ratio(request.size, RATIOS)
    if ratio is not None:
        config["imageConfig"] = {"aspectRatio": ratio}
    return {"contents": [{"role": "user", "parts": parts}], "generationConfig": config}


def gemini_reply(channel: str, reply: JSON) -> ImageReply:
    pictures: list[Picture] = []
    candidates = reply.get("candidates")
    for candidate in candidates if isinstance(candidates, list) else ():
        content = candidate.get("content") if isinstance(candidate, dict) else None
        parts = content.get("parts") if isinstance(content, dict) else None
        for part in parts if isinstance(parts, list) else ():
            inline = part.get("inlineData") if isinstance(part, dict) else None
            if isinstance(inline, dict) and sniff_image(_head(inline.get("data"))) is not None:
                pictures.append(decoded(channel, inline.get("data")))
    if not pictures:
        raise UpstreamError(f"The upstream channel `{channel}` sent no images.")
    return ImageReply(tuple(pictures), usage=openai_usage(reply.get("usageMetadata")))


def _head(data: Any) -> bytes:
    """The first bytes of a base64 string, enough to sniff (empty when not base64)."""
    if not isinstance(data, str):
        return b""
    try:
        return base64.b64decode(data[:24], validate=True)
    except ValueError:
        return b""


def openai_usage(metadata: Any) -> JSON | None:
    """Gemini's ``usageMetadata`` as OpenAI's image ``usage`` (counts unchecked: the job
    reads them through ``domain.usage``)."""
    if not isinstance(metadata, dict):
        return None
    image_tokens = 0
    details = metadata.get("promptTokensDetails")
    for detail in details if isinstance(details, list) else ():
        if isinstance(detail, dict) and detail.get("modality") == "IMAGE":
            count = detail.get("tokenCount")
            image_tokens += count if type(count) is int else 0
    prompt = metadata.get("promptTokenCount")
    output = metadata.get("candidatesTokenCount")
    thoughts = metadata.get("thoughtsTokenCount")
    if type(output) is int and type(thoughts) is int:
        output += thoughts  # thinking is billed as output
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"image_tokens": image_tokens},
        "output_tokens": output,
    }
