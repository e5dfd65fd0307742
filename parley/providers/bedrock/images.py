"""Images on Amazon Bedrock (``type: bedrock``), through ``InvokeModel``
(``POST /model/{model id}/invoke``, signed as every Bedrock call: ``adapter.py``).

Two families, told apart by the model id (after an inference profile's region prefix,
``us.``):

- **Amazon** (``amazon.titan-image-generator-*``, ``amazon.nova-canvas-*``):
  ``{"taskType": "TEXT_IMAGE", "textToImageParams": {"text"}, "imageGenerationConfig":
  {"numberOfImages", "width"?, "height"?, "quality"?}}``; an edit without a mask is
  ``IMAGE_VARIATION`` (``imageVariationParams: {"text", "images"}``). ``quality``
  ``hd``/``high`` is ``premium``, ``standard``/``low``/``medium`` ``standard``. The reply
  is ``{"images": [base64...], "error"?}``.
- **Stability** (``stability.*``): ``{"prompt", "mode", "aspect_ratio"?,
  "output_format"?}``, ``mode: image-to-image`` with the edit's ``image`` (one image,
  no mask); one image a call. The reply is ``{"images", "seeds", "finish_reasons"}``;
  a finish reason ``Filter reason: ...`` is a 400 ``content_policy_violation``.

Neither reports usage (price these models ``per_image``), nor streams (a stream is the
whole reply). What they cannot say is a 400 naming the field: a ``mask`` (OpenAI's mask
marks the edit with transparency, Amazon's and Stability's otherwise), ``background``,
``style``, ``moderation``, ``input_fidelity``, ``output_compression``; ``n`` above one
on Stability; a ``size`` Amazon's models do not make is refused by Bedrock itself.
"""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

from parley import upstream_json
from parley.domain.images import SIZE, nearest_ratio
from parley.domain.wire import JSON
from parley.errors import InvalidRequest, UpstreamError
from parley.providers.base import (
    ImageEvent,
    ImageReply,
    ImageRequest,
    ReplyBounds,
    Target,
    upstream_errors,
)
from parley.providers.bedrock.adapter import BedrockAdapter, secret
from parley.providers.bedrock.refusal import refusal
from parley.providers.pictures import decoded

PREMIUM = frozenset({"hd", "high"})
LABELS = ("user", "safety_identifier")
"""The caller's own labels: not sent (InvokeModel bodies have no field for them)."""
STABILITY_RATIOS = ("1:1", "16:9", "21:9", "2:3", "3:2", "4:5", "5:4", "9:16", "9:21")


class BedrockImages:
    """``Images`` for Amazon's and Stability's image models, signed by ``adapter``."""

    __slots__ = ("_adapter", "_bounds")

    def __init__(self, adapter: BedrockAdapter, bounds: ReplyBounds | None = None) -> None:
        self._adapter = adapter
        self._bounds = bounds or ReplyBounds()

    async def images(self, target: Target, request: ImageRequest) -> ImageReply:
        _refuse_unsayable(request)
        stability = family(target.model) == "stability"
        payload = stability_request(request) if stability else amazon_request(request)
        with upstream_errors(target.channel):
            reply = await self._adapter.send(target, "invoke", payload)
            raw = await reply.read(self._bounds.max_reply_bytes)
            if reply.status >= 300:
                raise refusal(target.channel, reply.status, raw, secret(target), reply.headers)
            found = upstream_json.loads(raw)
        if not isinstance(found, dict):
            raise UpstreamError(f"The upstream channel `{target.channel}` sent no images.")
        return read_reply(target.channel, found)

    @asynccontextmanager
    async def images_stream(
        self, target: Target, request: ImageRequest
    ) -> AsyncIterator[AsyncIterator[Sequence[ImageEvent]]]:
        reply = await self.images(target, request)
        yield _once(reply)


async def _once(reply: ImageReply) -> AsyncIterator[Sequence[ImageEvent]]:
    yield (reply,)


def family(model: str) -> str:
    """``amazon`` or ``stability``, from a model id or inference profile."""
    parts = model.split(".")
    return "stability" if "stability" in parts[:2] else "amazon"


def _refuse_unsayable(request: ImageRequest) -> None:
    if request.mask is not None:
        raise InvalidRequest(
            "This model's upstream (Bedrock) marks edits otherwise than OpenAI's mask; "
            "edit without a mask.",
            param="mask",
        )
    if request.background not in (None, "auto"):
        raise InvalidRequest(
            "This model's upstream (Bedrock) has no 'background'.", param="background"
        )
    if request.output_compression is not None:
        raise InvalidRequest(
            "This model's upstream (Bedrock) has no 'output_compression'.",
            param="output_compression",
        )
    for name, _ in request.options:
        if name not in LABELS:
            raise InvalidRequest(f"This model's upstream (Bedrock) has no '{name}'.", param=name)


def amazon_request(request: ImageRequest) -> JSON:
    if request.output_format not in (None, "png"):
        raise InvalidRequest("Amazon's image models write PNG.", param="output_format")
    config: JSON = {"numberOfImages": request.n}
    found = SIZE.match(request.size or "")
    if found is not None:
        config["width"], config["height"] = (int(side) for side in found.groups())
    if request.quality not in (None, "auto"):
        config["quality"] = "premium" if request.quality in PREMIUM else "standard"
    if request.edit:
        images = [base64.b64encode(image.data).decode() for image in request.inputs]
        return {
            "taskType": "IMAGE_VARIATION",
            "imageVariationParams": {"text": request.prompt, "images": images},
            "imageGenerationConfig": config,
        }
    return {
        "taskType": "TEXT_IMAGE",
        "textToImageParams": {"text": request.prompt},
        "imageGenerationConfig": config,
    }


def stability_request(request: ImageRequest) -> JSON:
    if request.n != 1:
        raise InvalidRequest("Stability's models make one image a call; send n=1.", param="n")
    if request.quality not in (None, "auto"):
        raise InvalidRequest("Stability's models have no 'quality'.", param="quality")
    payload: JSON = {"prompt": request.prompt, "mode": "text-to-image"}
    if request.edit:
        if len(request.inputs) > 1:
            raise InvalidRequest("Stability's models edit one image.", param="image")
        payload["mode"] = "image-to-image"
        payload["image"] = base64.b64encode(request.inputs[0].data).decode()
    else:
        ratio = nearest_ratio(request.size, STABILITY_RATIOS)
        if ratio is not None:
            payload["aspect_ratio"] = ratio
    if request.output_format is not None:
        payload["output_format"] = request.output_format
    return payload


def read_reply(channel: str, reply: JSON) -> ImageReply:
    """The images of an Amazon or Stability reply; a filtered request is the caller's
    400, any other failure the upstream's."""
    reasons = reply.get("finish_reasons")
    for reason in reasons if isinstance(reasons, list) else ():
        if isinstance(reason, str) and reason.startswith("Filter reason"):
            raise InvalidRequest(
                f"The upstream refused the request ({reason[:100]}).",
                param="prompt",
                code="content_policy_violation",
            )
    error = reply.get("error")
    if isinstance(error, str) and error:
        raise UpstreamError(f"The upstream channel `{channel}` could not make the images.")
    images = reply.get("images")
    if not isinstance(images, list) or not images:
        raise UpstreamError(f"The upstream channel `{channel}` sent no images.")
    return ImageReply(tuple(decoded(channel, image) for image in images))
