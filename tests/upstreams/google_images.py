"""Google's image models, for the Gemini API and Vertex AI fakes (``gemini.py``,
``vertex.py``), written from Google's references: Imagen's ``:predict``
(``instances[].prompt``; ``parameters.sampleCount``, ``aspectRatio``, ``outputOptions``;
``predictions[]`` of ``bytesBase64Encoded`` and ``mimeType``, or ``raiFilteredReason``)
and Gemini image output through ``:generateContent`` (``responseModalities`` with
``IMAGE``, ``imageConfig.aspectRatio``; images as ``inlineData`` parts, usage in
``usageMetadata`` with per-modality details).

A model is an image model when its name starts with ``imagen`` (``predict``) or holds
``-image`` (``generateContent``): ``answers(model)`` says so. Imagen takes 1 to
``IMAGEN_MAX`` samples; each image is ``png(prompt#index)`` (or a JPEG head for
``image/jpeg``). Knobs after ``+``: ``filter`` (every prediction filtered, as Imagen
answers a blocked prompt), ``filter-1`` (the first only). A Gemini image model counts
``words`` of text and ``IMAGE_INPUT_TOKENS`` per input image in, ``IMAGE_OUTPUT_TOKENS``
out; without ``IMAGE`` among ``responseModalities`` it answers text only.
"""

from __future__ import annotations

import base64
from typing import Any

from aiohttp import web

from tests.upstreams.openai_images import png
from tests.upstreams.server import json_reply

IMAGEN_MAX = 4
RATIOS = frozenset({"1:1", "3:4", "4:3", "9:16", "16:9"})
IMAGE_INPUT_TOKENS = 258
IMAGE_OUTPUT_TOKENS = 1290
JPEG = b"\xff\xd8\xff\xe0\0\x10JFIF\0" + b"\0" * 32


def answers(model: str) -> bool:
    name = model.split("+", maxsplit=1)[0]
    return name.startswith("imagen") or "-image" in name


def answer(body: Any, model: str, method: str) -> web.Response:
    name = model.split("+", maxsplit=1)[0]
    if name.startswith("imagen"):
        if method != "predict":
            return _error(404, f"Method {method} not found.")
        return _imagen(body, model)
    if method != "generateContent":
        return _error(400, f"{method} does not serve image output.")
    return _gemini(body)


def _error(status: int, message: str) -> web.Response:
    names = {400: "INVALID_ARGUMENT", 404: "NOT_FOUND"}
    return json_reply(status, {"error": {"code": status, "message": message,
                                         "status": names[status]}})  # fmt: skip


def _imagen(body: Any, model: str) -> web.Response:
    instances = body.get("instances") if isinstance(body, dict) else None
    if not isinstance(instances, list) or len(instances) != 1:
        return _error(400, "Exactly one instance is expected.")
    prompt = instances[0].get("prompt")
    parameters = body.get("parameters") or {}
    count = parameters.get("sampleCount", IMAGEN_MAX)
    if not isinstance(prompt, str) or not isinstance(count, int) or not 1 <= count <= IMAGEN_MAX:
        return _error(400, "Invalid prompt or sampleCount.")
    if parameters.get("aspectRatio", "1:1") not in RATIOS:
        return _error(400, "Unsupported aspect ratio.")
    media_type = (parameters.get("outputOptions") or {}).get("mimeType", "image/png")
    if media_type not in ("image/png", "image/jpeg"):
        return _error(400, "Unsupported mimeType.")
    knobs = model.split("+")[1:]
    predictions: list[dict[str, Any]] = []
    for index in range(count):
        if "filter" in knobs or ("filter-1" in knobs and index == 0):
            predictions.append({"raiFilteredReason": "The prompt may violate our policies."})
            continue
        data = JPEG if media_type == "image/jpeg" else png(f"{prompt}#{index}")
        predictions.append(
            {"bytesBase64Encoded": base64.b64encode(data).decode(), "mimeType": media_type}
        )
    return json_reply(200, {"predictions": predictions})


def _gemini(body: Any) -> web.Response:
    contents = body.get("contents") if isinstance(body, dict) else None
    if not isinstance(contents, list) or not contents:
        return _error(400, "contents is required.")
    words, images, prompt = 0, 0, ""
    for part in contents[-1].get("parts") or ():
        if "text" in part:
            prompt = part["text"]
            words += len(part["text"].split())
        elif "inlineData" in part:
            base64.b64decode(part["inlineData"]["data"], validate=True)
            images += 1
        else:
            return _error(400, "Unsupported part.")
    config = body.get("generationConfig") or {}
    ratio = (config.get("imageConfig") or {}).get("aspectRatio", "1:1")
    if ratio not in RATIOS:
        return _error(400, "Unsupported aspect ratio.")
    parts: list[dict[str, Any]] = [{"text": "Here is your image."}]
    output = 5
    if "IMAGE" in (config.get("responseModalities") or ()):
        data = base64.b64encode(png(f"{prompt}#0")).decode()
        parts.append({"inlineData": {"mimeType": "image/png", "data": data}})
        output += IMAGE_OUTPUT_TOKENS
    image_in = images * IMAGE_INPUT_TOKENS
    usage = {
        "promptTokenCount": words + image_in,
        "candidatesTokenCount": output,
        "totalTokenCount": words + image_in + output,
        "promptTokensDetails": [
            {"modality": "TEXT", "tokenCount": words},
            *([{"modality": "IMAGE", "tokenCount": image_in}] if images else []),
        ],
    }
    candidate = {"content": {"role": "model", "parts": parts}, "finishReason": "STOP"}
    return json_reply(200, {"candidates": [candidate], "usageMetadata": usage})
