"""The image endpoints' requests, checked: a generation's JSON body, an edit's form.

Both take OpenAI's fields (``prompt``, ``n``, ``size``, ``quality``, ``background``,
``output_format``, ``output_compression``, ``response_format``, ``stream``,
``partial_images``, ``user``, ``style``, ``moderation``, ``safety_identifier``, and
``input_fidelity`` for edits); a field Parley does not know is a 400 naming it, since
what it would ask an upstream for (more images, another kind of output) is not in the
price Parley holds. An edit's ``image`` (or ``image[]``, several) and ``mask`` are
sniffed from their bytes as PNG, JPEG or WebP; anything else is a 400 naming the field.
Every 400 here comes before the call is admitted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from multidict import MultiDict

from parley.api.uploads import Files
from parley.domain.images import QUALITIES, is_size, sniff_image
from parley.errors import InvalidRequest
from parley.providers.base import ImageInput, ImageRequest

MAX_PROMPT_CHARS = 32_000
MAX_IMAGES = 10
MAX_PARTIAL_IMAGES = 3
CHOICES = {
    "quality": tuple(sorted(QUALITIES)),
    "background": ("auto", "opaque", "transparent"),
    "output_format": ("jpeg", "png", "webp"),
    "response_format": ("b64_json", "url"),
    "style": ("natural", "vivid"),
    "moderation": ("auto", "low"),
    "input_fidelity": ("high", "low"),
}
PASSED_ON = ("style", "moderation", "user", "safety_identifier")
"""Fields sent on as given to the upstreams that speak OpenAI's API."""
EDIT_ONLY = ("input_fidelity",)
KNOWN = frozenset(
    {"model", "prompt", "n", "size", "quality", "background", "output_format"}
    | {"output_compression", "response_format", "stream", "partial_images"}
    | set(PASSED_ON)
)
IMAGE_FIELDS = ("image", "image[]")
MASK = "mask"


@dataclass(frozen=True, slots=True)
class ImageCall:
    """A checked image call: the model named, whether to stream, and the request."""

    model: str
    stream: bool
    request: ImageRequest

    @property
    def url_reply(self) -> bool | None:
        return self.request.url_reply


def generation(body: dict[str, Any]) -> ImageCall:
    """A generation's JSON body, checked."""
    for name in body:
        if name not in KNOWN:
            raise InvalidRequest(f"Unknown parameter: '{name}'.", param=name)
    return _call(_Json(body), ())


def edit(form: Files, max_images: int) -> ImageCall:
    """An edit's form, checked (at most ``max_images`` images), its images and mask
    sniffed."""
    fields = form.fields
    for name in fields:
        if name not in KNOWN and name not in EDIT_ONLY:
            raise InvalidRequest(f"Unknown parameter: '{name}'.", param=name)
    images: list[ImageInput] = []
    mask: ImageInput | None = None
    for name, data in form.files:
        upload = _sniffed(name, data)
        if name == MASK:
            if mask is not None:
                raise InvalidRequest("Send one 'mask'.", param=MASK)
            mask = upload
        else:
            images.append(upload)
    if not images:
        raise InvalidRequest("Missing required parameter: 'image'.", param="image")
    if len(images) > max_images:
        raise InvalidRequest(f"Send at most {max_images} images.", param="image")
    return _call(_Form(fields), tuple(images), mask)


def _sniffed(name: str, data: bytes) -> ImageInput:
    media_type = sniff_image(data[:16])
    if media_type is None:
        param = "image" if name == "image[]" else name
        raise InvalidRequest(
            f"The '{param}' file is not a PNG, JPEG or WebP image.",
            param=param,
            code="invalid_image_format",
        )
    return ImageInput(data, media_type)


class _Json:
    """A JSON body's fields, typed as JSON types them."""

    def __init__(self, body: dict[str, Any]) -> None:
        self._body = body

    def text(self, name: str) -> str | None:
        value = self._body.get(name)
        if value is not None and not isinstance(value, str):
            raise InvalidRequest(f"'{name}' must be a string.", param=name)
        return value

    def integer(self, name: str) -> int | None:
        value = self._body.get(name)
        if value is not None and (type(value) is not int):
            raise InvalidRequest(f"'{name}' must be an integer.", param=name)
        return value

    def boolean(self, name: str) -> bool:
        value = self._body.get(name)
        if value is not None and not isinstance(value, bool):
            raise InvalidRequest(f"'{name}' must be true or false.", param=name)
        return bool(value)


class _Form:
    """A form's fields, read as OpenAI's SDKs write them (numbers and booleans as text)."""

    def __init__(self, fields: MultiDict[str]) -> None:
        self._fields = fields

    def text(self, name: str) -> str | None:
        values = self._fields.getall(name, [])
        if len(values) > 1:
            raise InvalidRequest(f"Send '{name}' once.", param=name)
        return values[0] if values else None

    def integer(self, name: str) -> int | None:
        value = self.text(name)
        if value is None or value == "":
            return None
        try:
            return int(value)
        except ValueError:
            raise InvalidRequest(f"'{name}' must be an integer.", param=name) from None

    def boolean(self, name: str) -> bool:
        value = (self.text(name) or "false").strip().lower()
        if value not in ("true", "false", "1", "0"):
            raise InvalidRequest(f"'{name}' must be true or false.", param=name)
        return value in ("true", "1")


def _call(
    fields: _Json | _Form, images: tuple[ImageInput, ...], mask: ImageInput | None = None
) -> ImageCall:
    model = fields.text("model")
    if not model:
        raise InvalidRequest("Missing required parameter: 'model'.", param="model")
    prompt = fields.text("prompt")
    if not prompt:
        raise InvalidRequest("Missing required parameter: 'prompt'.", param="prompt")
    if len(prompt) > MAX_PROMPT_CHARS:
        raise InvalidRequest(
            f"'prompt' is longer than {MAX_PROMPT_CHARS} characters.", param="prompt"
        )
    n = _ranged(fields, "n", 1, MAX_IMAGES)
    size = fields.text("size")
    if size is not None and not is_size(size):
        raise InvalidRequest(
            f"'size' must be auto or WIDTHxHEIGHT (1024x1024); got '{size}'.", param="size"
        )
    stream = fields.boolean("stream")
    partial = _ranged(fields, "partial_images", 0, MAX_PARTIAL_IMAGES)
    if partial is not None and not stream:
        raise InvalidRequest("'partial_images' needs stream: true.", param="partial_images")
    response_format = _choice(fields, "response_format")
    if stream and response_format == "url":
        raise InvalidRequest(
            "A streamed reply carries its images as base64; omit response_format or send b64_json.",
            param="response_format",
        )
    options: list[tuple[str, str | int]] = []
    for name in (*PASSED_ON, *EDIT_ONLY):
        value = _choice(fields, name) if name in CHOICES else fields.text(name)
        if value is not None:
            options.append((name, value))
    request = ImageRequest(
        prompt=prompt,
        n=n or 1,
        size=size,
        quality=_choice(fields, "quality"),
        background=_choice(fields, "background"),
        output_format=_choice(fields, "output_format"),
        output_compression=_ranged(fields, "output_compression", 0, 100),
        inputs=images,
        mask=mask,
        partial_images=partial,
        url_reply=None if response_format is None else response_format == "url",
        options=tuple(options),
    )
    return ImageCall(model, stream, request)


def _ranged(fields: _Json | _Form, name: str, low: int, high: int) -> int | None:
    value = fields.integer(name)
    if value is not None and not low <= value <= high:
        raise InvalidRequest(f"'{name}' must be from {low} to {high}; got {value}.", param=name)
    return value


def _choice(fields: _Json | _Form, name: str) -> str | None:
    value = fields.text(name)
    if value is not None and value not in CHOICES[name]:
        allowed = ", ".join(CHOICES[name])
        raise InvalidRequest(f"'{name}' must be one of {allowed}; got '{value}'.", param=name)
    return value
