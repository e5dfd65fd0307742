"""A ``POST /v1/chat/completions`` body read and checked: what every route needs of it.

``parse_chat`` reads the body into a ``TextRequest``; ``scan_images`` finds what its
images are to a model, which ``Images.check`` holds against the resolved one. A large
body is read by the same functions in a body process (``api/apart.py``).
"""

from __future__ import annotations

from typing import Any

from parley.api.body import required_string
from parley.api.refusal import Refusal
from parley.api.textgen import TextRequest, text_request
from parley.dialects.openai_chat import read_content
from parley.dialects.straight import estimate as estimate_texts
from parley.domain.models import Resolved
from parley.domain.tokens import CHARS_PER_TOKEN, TOKENS_PER_MESSAGE
from parley.domain.value import value
from parley.errors import InvalidRequest, ParleyError, PayloadTooLarge

ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})


def parse_chat(body: dict[str, Any], body_bytes: int) -> TextRequest:
    """The body checked, the prompt estimated and its images counted."""
    return _parse_chat(body, body_bytes)[0]


def parse_chat_apart(
    body: dict[str, Any], body_bytes: int, max_image_bytes: int, texts: list[str] | None = None
) -> tuple[TextRequest, Images]:
    """``parse_chat``, and what the body's images are to a model (``scan_images``),
    for a body read in a body process; ``texts``, the messages' when they are a user's
    plain texts (``dialects.straight.plain_texts``), are estimated without a message
    read again."""
    text, first = _parse_chat(body, body_bytes, texts)
    if first is None:
        return text, NO_IMAGES
    return text, scan_images(body["messages"], max_image_bytes, first)


def _parse_chat(
    body: dict[str, Any], body_bytes: int, texts: list[str] | None = None
) -> tuple[TextRequest, int | None]:
    """The request, and the index of the first message with an image part."""
    model = required_string(body, "model")
    messages = body.get("messages")
    if messages is None:
        raise InvalidRequest("Missing required parameter: 'messages'.", param="messages")
    if not isinstance(messages, list) or not messages:
        raise InvalidRequest("'messages' must be a non-empty array.", param="messages")
    if texts is None:
        estimate, images, first = _read_messages(messages)
    else:  # each a user's message of a string: nothing to check, no image
        framing = 3 + TOKENS_PER_MESSAGE * len(texts)
        estimate, images, first = framing + estimate_texts(texts), 0, None
    text = text_request(
        body,
        model=model,
        prompt_estimate=estimate,
        body_bytes=body_bytes,
        images=images,
        length_fields=("max_tokens", "max_completion_tokens"),
    )
    return text, first


def _read_messages(messages: list[Any]) -> tuple[int, int, int | None]:
    """Each message checked (``_check_message``), the prompt's estimate and the image
    parts (as ``openai_chat.read_messages`` finds them), and where the first message
    with one is, in one pass. A message of a known role and a string, the common case,
    costs a few lookups."""
    first = None
    total = 3 + TOKENS_PER_MESSAGE * len(messages)
    images = 0
    for index, message in enumerate(messages):
        if message.__class__ is dict:
            role, content = message.get("role"), message.get("content")
            if content.__class__ is str and role.__class__ is str and role in ROLES:
                total += (len(content) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN
                continue
        _check_message(message, index)  # a string content with a known role came first
        content = message.get("content")
        if content.__class__ is list:
            if first is None and _has_image(content):
                first = index
            estimate, found = read_content(content)
            total += estimate
            images += found
    return total, images, first


def _has_image(content: list[Any]) -> bool:
    return any(part.get("type") == "image_url" for part in content)


def _check_message(message: Any, index: int) -> None:
    param = f"messages[{index}]"
    if not isinstance(message, dict):
        raise InvalidRequest(f"'{param}' must be an object with 'role' and 'content'.", param=param)
    role = message.get("role")
    if not isinstance(role, str) or role not in ROLES:
        allowed = ", ".join(sorted(ROLES))
        raise InvalidRequest(f"'{param}.role' must be one of: {allowed}.", param=f"{param}.role")
    content = message.get("content")
    if content is None:
        if role == "assistant" and (message.get("tool_calls") or message.get("function_call")):
            return
        raise InvalidRequest(
            f"Missing required parameter: '{param}.content'.", param=f"{param}.content"
        )
    if isinstance(content, str):
        return
    if not isinstance(content, list):
        raise InvalidRequest(
            f"'{param}.content' must be a string or an array of content parts.",
            param=f"{param}.content",
        )
    for part_index, part in enumerate(content):
        if not isinstance(part, dict) or not isinstance(part.get("type"), str):
            where = f"{param}.content[{part_index}]"
            raise InvalidRequest(f"'{where}' must be an object with a 'type'.", param=where)


def check_images(body: dict[str, Any], model: Resolved, max_bytes: int) -> None:
    """Images only for vision models, and a data-URL image no larger than ``max_bytes``."""
    scan_images(body["messages"], max_bytes).check(model)


@value
class Images:
    """What a chat body's images are to a model: where the first image part is (any
    model without vision refuses it), and the first refusal a vision model makes (an
    image too large, or not a URL). Found once (in a body process for a large body)
    and checked against the model later."""

    first: str | None
    refusal: Refusal | None

    def check(self, model: Resolved) -> None:
        """Raise what ``model`` refuses: the first image when it takes none, else the
        first image it cannot take."""
        if self.first is None:
            return
        if not model.spec.vision:
            raise InvalidRequest(
                f"The model `{model.requested}` does not accept images; "
                "use a vision-capable model.",
                param=self.first,
                code="image_not_supported",
            )
        if self.refusal is not None:
            raise self.refusal.error()


NO_IMAGES = Images(None, None)


def scan_images(messages: list[Any], max_bytes: int, start: int = 0) -> Images:
    """The images of checked chat ``messages`` (from index ``start``: none come
    before), up to the first a vision model refuses."""
    first = None
    for index in range(start, len(messages)):
        content = messages[index].get("content")
        if content.__class__ is not list:
            continue
        for part_index, part in enumerate(content):
            if part.get("type") != "image_url":
                continue
            where = f"messages[{index}].content[{part_index}]"
            first = first or where
            try:
                _check_image_size(part, where, max_bytes)
            except ParleyError as error:
                return Images(first, Refusal.of(error))
    return Images(first, None) if first is not None else NO_IMAGES


def _check_image_size(part: dict[str, Any], where: str, max_bytes: int) -> None:
    image = part.get("image_url")
    url = image.get("url") if isinstance(image, dict) else image
    if not isinstance(url, str) or not url:
        raise InvalidRequest(f"'{where}.image_url.url' must be a URL or a data URL.", param=where)
    if not url.startswith("data:"):
        return
    header, _, data = url.partition(",")
    if ";base64" not in header:
        raise InvalidRequest(f"'{where}' must be a base64 data URL.", param=where)
    size = len(data) * 3 // 4 - data[-2:].count("=")
    if size > max_bytes:
        raise PayloadTooLarge(
            f"The image at {where} is {size} bytes; the limit is {max_bytes} bytes. "
            "Downscale the image and try again.",
            param=where,
            code="image_too_large",
        )
