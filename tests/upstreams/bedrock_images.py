"""Bedrock's ``InvokeModel`` for image models, for the Bedrock fake (``bedrock.py``),
written from the Bedrock user guide's request and response bodies of the Amazon Titan
Image Generator (and Nova Canvas, which takes the same) and of Stability AI's models.

Amazon: ``taskType`` ``TEXT_IMAGE`` (``textToImageParams.text``) or ``IMAGE_VARIATION``
(``imageVariationParams.text`` and ``images``), ``imageGenerationConfig`` with
``numberOfImages`` 1 to ``AMAZON_MAX``, ``width``/``height`` among ``AMAZON_SIZES``
(both or neither) and ``quality`` ``standard`` or ``premium``; reply ``{"images",
"error": null}``. Stability: ``prompt``, ``mode`` (``text-to-image``, or
``image-to-image`` with ``image``), ``aspect_ratio`` among ``STABILITY_RATIOS``,
``output_format``; reply ``{"seeds", "finish_reasons", "images"}`` of one image. A body
that breaks these is a 400 ``ValidationException``. Images are ``png(prompt#index)``.
Knob, after ``+`` in the model id: ``filter`` (Stability's ``Filter reason: prompt``,
no image).
"""

from __future__ import annotations

import base64
from typing import Any

import orjson
from aiohttp import web

from tests.upstreams.openai_images import is_image, png

AMAZON_MAX = 5
AMAZON_SIZES = frozenset({(1024, 1024), (768, 768), (512, 512), (1152, 768), (768, 1152),
                          (1280, 768), (768, 1280)})  # fmt: skip
STABILITY_RATIOS = frozenset({"16:9", "1:1", "21:9", "2:3", "3:2", "4:5", "5:4", "9:16", "9:21"})


def invoke(body: Any, model: str, invalid: Any) -> web.Response:
    """The reply to ``InvokeModel`` of ``model``; ``invalid(message)`` is the fake's 400."""
    name = model.split("+", maxsplit=1)[0]
    if not isinstance(body, dict):
        return invalid("Malformed input request.")
    if "stability." in name:
        return _stability(body, "filter" in model.split("+")[1:], invalid)
    if "titan-image" in name or "nova-canvas" in name:
        return _amazon(body, invalid)
    return invalid(f"The model {name} does not serve InvokeModel images here.")


def _amazon(body: dict[str, Any], invalid: Any) -> web.Response:
    task = body.get("taskType")
    config = body.get("imageGenerationConfig") or {}
    count = config.get("numberOfImages", 1)
    if not isinstance(count, int) or not 1 <= count <= AMAZON_MAX:
        return invalid("numberOfImages must be 1 to 5.")
    if ("width" in config) != ("height" in config) or (
        "width" in config and (config["width"], config["height"]) not in AMAZON_SIZES
    ):
        return invalid("Invalid image dimensions.")
    if config.get("quality", "standard") not in ("standard", "premium"):
        return invalid("Invalid quality.")
    if task == "TEXT_IMAGE":
        text = (body.get("textToImageParams") or {}).get("text")
    elif task == "IMAGE_VARIATION":
        params = body.get("imageVariationParams") or {}
        text = params.get("text")
        images = params.get("images")
        if (
            not isinstance(images, list)
            or not images
            or not all(is_image(base64.b64decode(image)) for image in images)
        ):
            return invalid("imageVariationParams.images must hold images.")
    else:
        return invalid(f"Unsupported taskType {task}.")
    if not isinstance(text, str) or not text:
        return invalid("text is required.")
    images = [base64.b64encode(png(f"{text}#{index}")).decode() for index in range(count)]
    return _json({"images": images, "error": None})


def _stability(body: dict[str, Any], filtered: bool, invalid: Any) -> web.Response:
    prompt = body.get("prompt")
    mode = body.get("mode", "text-to-image")
    if not isinstance(prompt, str) or mode not in ("text-to-image", "image-to-image"):
        return invalid("Invalid prompt or mode.")
    if mode == "image-to-image" and not is_image(base64.b64decode(body.get("image") or "")):
        return invalid("image is required for image-to-image.")
    if body.get("aspect_ratio", "1:1") not in STABILITY_RATIOS:
        return invalid("Invalid aspect_ratio.")
    if filtered:
        return _json({"seeds": [7], "finish_reasons": ["Filter reason: prompt"], "images": []})
    image = base64.b64encode(png(f"{prompt}#0")).decode()
    return _json({"seeds": [7], "finish_reasons": [None], "images": [image]})


def _json(payload: dict[str, Any]) -> web.Response:
    return web.Response(body=orjson.dumps(payload), content_type="application/json")
