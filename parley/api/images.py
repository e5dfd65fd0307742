"""POST /v1/images/generations and POST /v1/images/edits: ``kind: image`` models,
through the runner.

A generation's JSON body and an edit's form are checked (``image_form``); the call
then takes the runner's path like every other. The reply is OpenAI's ``ImagesResponse``:
``data`` holds each image as ``b64_json`` (the default) or, with ``response_format:
url``, as a URL of Parley's own (``/v1/images/files/{id}``, readable by the caller's
group until it expires: ``runtime/image_files.py``), never an upstream's.

Billing (docs/api.md, Images): a model with a ``per_image`` table is billed per image
made, at the price of its size and quality (a part left ``auto`` is read from what the
upstream says it made); any other by tokens, as the upstream reports them (text and
image input, output), or Parley's estimate from OpenAI's published counts when it
reports none. Admission holds the worst case: ``n`` images at the dearest grade the
request allows, and the most tokens they can take. ``usage`` on every reply says what
was billed, in OpenAI's shape, with Parley's ``images`` count.

``stream: true`` relays the upstream's partial images and finished images as OpenAI's
``image_generation.*`` (``image_edit.*``) events; an upstream that cannot stream sends
its whole reply as the finished events.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass

import orjson
from aiohttp import web

from parley.api.body import read_json
from parley.api.image_form import IMAGE_FIELDS, MASK, ImageCall, edit, generation
from parley.api.uploads import read_files
from parley.domain.images import (
    FORMATS,
    Grade,
    estimated_output_tokens,
    output_ceiling,
)
from parley.domain.models import Resolved
from parley.domain.tokens import TOKENS_PER_IMAGE, estimate_text, prompt_ceiling
from parley.domain.usage import Allowance, Usage, reported_counts, with_estimate
from parley.domain.wire import JSON
from parley.errors import InvalidRequest, ParleyError, ServiceUnavailable, UpstreamError
from parley.pipeline import runner
from parley.pipeline.authenticate import Caller
from parley.pipeline.call import Call
from parley.pipeline.context import caller, services
from parley.pipeline.job import NO_HEADERS, Batches, Operation
from parley.pipeline.precheck import refuse_before_upload
from parley.pipeline.route import Route
from parley.pipeline.services import Services
from parley.providers.base import ImageEvent, ImageReply, Images, PartialImage
from parley.providers.registry import UnknownProviderType
from parley.sse import json_event

IMAGE_KINDS = frozenset({"image"})
GENERATIONS = Operation("image generations", "/v1/images/generations", IMAGE_KINDS)
EDITS = Operation("image edits", "/v1/images/edits", IMAGE_KINDS)
FILES_PATH = "/v1/images/files/"
UNSTATED: JSON = {"background": "auto", "quality": "auto", "size": "auto"}
"""What a stream's events say of a field neither the caller nor the upstream chose (the
events always carry them)."""
PARTIAL_IMAGE_TOKENS = 100
"""Output tokens OpenAI bills a streamed partial image."""


async def create_generation(request: web.Request) -> web.StreamResponse:
    asked = generation(await read_json(request))
    return await _serve(request, asked)


async def create_edit(request: web.Request) -> web.StreamResponse:
    svc = services(request)
    await refuse_before_upload(request)  # an over-limit caller's upload is never read
    options = svc.settings.images
    fields = (*IMAGE_FIELDS, MASK)
    most = options.max_files + 1  # and the mask
    total = svc.settings.server.max_body_bytes
    form = await read_files(request, fields, options.max_file_bytes, most, total)
    return await _serve(request, edit(form, options.max_files))


async def _serve(request: web.Request, asked: ImageCall) -> web.StreamResponse:
    svc = services(request)
    base = svc.settings.images.public_url or str(request.url.origin())
    where = Where(caller(request).group.id, base.rstrip("/") + FILES_PATH)
    if asked.stream:
        return await runner.stream(request, ImageStream(asked, svc))
    return await runner.reply(request, ImageJob(asked, svc, where))


@dataclass(frozen=True, slots=True)
class Where:
    """Where images served by URL go: the caller's group, and the URLs' beginning."""

    group: int
    base: str


@dataclass(frozen=True, slots=True)
class Made:
    """An upstream's images, with the URLs Parley keeps them under (when asked for)."""

    reply: ImageReply
    urls: tuple[str, ...] | None = None


class ImageCalls:
    """What both jobs share: the model's prices checked, the worst case held, usage."""

    def __init__(self, asked: ImageCall, svc: Services) -> None:
        self.asked = asked
        self.providers = svc.providers
        self.files = svc.image_files
        request = asked.request
        self.grade = Grade(request.size or "auto", request.quality or "auto")
        self.per_image = False
        self.created = int(time.time())
        inputs = len(request.inputs) + (request.mask is not None)
        self.input_images = inputs
        self.text_tokens = estimate_text(request.prompt)
        self.ceiling = prompt_ceiling(len(request.prompt.encode()), inputs)

    @property
    def operation(self) -> Operation:
        return EDITS if self.asked.request.edit else GENERATIONS

    @property
    def model(self) -> str:
        return self.asked.model

    @property
    def kind(self) -> str:
        return "image_edit" if self.asked.request.edit else "image_generation"

    def accept(self, model: Resolved) -> None:
        price = model.spec.price
        self.per_image = bool(price.per_image)
        if self.per_image and price.image_price(self.grade) is None:
            raise InvalidRequest(
                f"The model `{model.requested}` has no price for images of size "
                f"{self.grade.size} and quality {self.grade.quality}.",
                param="size",
                code="image_grade_not_priced",
            )

    def adapter(self, route: Route) -> Images:
        """The route's adapter; a channel (added live) of a type that cannot serve images
        fails as an upstream would, so the next channel is tried."""
        try:
            return self.providers.images(route.provider_type)
        except UnknownProviderType:
            raise UpstreamError(
                f"The upstream channel `{route.target.channel}` cannot serve images."
            ) from None

    def reservation(self, model: Resolved, caller: Caller) -> int:
        output = self.asked.request.n * estimated_output_tokens(self.grade)
        return self.text_tokens + self.input_images * TOKENS_PER_IMAGE + output

    def allowance(self, model: Resolved) -> Allowance:
        n = self.asked.request.n
        partials = self.asked.request.partial_images or 0
        completion = n * (output_ceiling(self.grade) + partials * PARTIAL_IMAGE_TOKENS)
        return Allowance(
            prompt_tokens=self.ceiling,
            completion_tokens=completion,
            images=n,
            image_grade=self.grade,
        )

    def usage_of(self, replies: Sequence[ImageReply], partials: int = 0) -> Usage:
        """What ``replies`` (and ``partials`` partial images) are billed: the upstream's
        token report carrying Parley's estimate, or the estimate; the images counted."""
        images = sum(len(reply.images) for reply in replies)
        grade = self.grade
        for reply in replies:
            grade = grade.settled(reply.size, reply.quality)
        image_tokens = self.input_images * TOKENS_PER_IMAGE
        output = images * estimated_output_tokens(grade) + partials * PARTIAL_IMAGE_TOKENS
        estimate = Usage(
            prompt_tokens=self.text_tokens + image_tokens,
            completion_tokens=output,
            estimated=True,
            images=images,
            image_grade=grade,
            image_tokens=image_tokens,
        )
        reported = _reported(replies, images, grade)
        if reported is None and self.per_image:
            return Usage(images=images, image_grade=grade)  # counted, so not estimated
        return with_estimate(reported, estimate)

    def data(self, reply: ImageReply, urls: tuple[str, ...] | None) -> list[JSON]:
        data: list[JSON] = []
        for index, picture in enumerate(reply.images):
            item: JSON = (
                {"url": urls[index]}
                if urls is not None
                else {"b64_json": base64.b64encode(picture.data).decode()}
            )
            if picture.revised_prompt is not None:
                item["revised_prompt"] = picture.revised_prompt
            data.append(item)
        return data

    def echoed(self, reply: ImageReply) -> JSON:
        """The fields OpenAI echoes: what the upstream said it made, else what was asked."""
        request = self.asked.request
        first = reply.images[0] if reply.images else None
        fmt = reply.output_format or request.output_format
        if fmt is None and first is not None:
            fmt = FORMATS.get(first.media_type)
        fields = {
            "background": reply.background or request.background,
            "output_format": fmt,
            "quality": reply.quality or request.quality,
            "size": reply.size or request.size,
        }
        return {name: value for name, value in fields.items() if value is not None}


class ImageJob(ImageCalls):
    """One whole ``ImagesResponse``: a ``ReplyJob`` for the runner."""

    def __init__(self, asked: ImageCall, svc: Services, where: Where) -> None:
        super().__init__(asked, svc)
        self.where = where

    async def call(self, route: Route) -> Made:
        reply = await self.adapter(route).images(route.target, self.asked.request)
        if not self.asked.url_reply:
            return Made(reply)
        urls = []
        try:
            for picture in reply.images:
                image_id, _ = await self.files.keep(
                    self.where.group, picture.data, picture.media_type
                )
                urls.append(self.where.base + image_id)
        except OSError:
            raise ServiceUnavailable(
                "The gateway could not keep the images for their URLs; retry, or ask for b64_json."
            ) from None
        return Made(reply, tuple(urls))

    def usage(self, reply: Made) -> Usage:
        return self.usage_of((reply.reply,))

    def render(self, reply: Made, call: Call, usage: Usage) -> web.StreamResponse:
        body: JSON = {"created": self.created, "data": self.data(reply.reply, reply.urls)}
        body.update(self.echoed(reply.reply))
        body["usage"] = stated_usage(usage)
        return web.Response(body=orjson.dumps(body), content_type="application/json")


class ImageStream(ImageCalls):
    """OpenAI's image events, relayed as they arrive: a ``StreamJob`` for the runner."""

    content_type = "text/event-stream"
    reply_headers = NO_HEADERS
    whole = None

    def __init__(self, asked: ImageCall, svc: Services) -> None:
        super().__init__(asked, svc)
        self._finished: list[ImageReply] = []
        self._partials = 0
        self._upstream_failed = False

    def open(self, route: Route) -> AbstractAsyncContextManager[Batches[ImageEvent]]:
        return self.adapter(route).images_stream(route.target, self.asked.request)

    def render(self, batch: Sequence[ImageEvent]) -> bytes:
        events = []
        for event in batch:
            if isinstance(event, PartialImage):
                self._partials += 1
                payload: JSON = {
                    "type": f"{self.kind}.partial_image",
                    "b64_json": base64.b64encode(event.data).decode(),
                    "created_at": self.created,
                    "partial_image_index": event.index,
                }
                payload.update(self._echoed_partial(event))
                events.append(json_event(payload, payload["type"]))
                continue
            self._finished.append(event)
            whole = stated_usage(self.usage_of((event,)))
            for index, picture in enumerate(event.images):
                alone = ImageReply(
                    (picture,), event.size, event.quality, event.background, event.output_format
                )
                payload = {
                    "type": f"{self.kind}.completed",
                    "b64_json": base64.b64encode(picture.data).decode(),
                    "created_at": self.created,
                }
                payload.update(UNSTATED | self.echoed(alone))
                payload["usage"] = whole if index == 0 else stated_usage(Usage())
                events.append(json_event(payload, payload["type"]))
        return b"".join(events)

    def _echoed_partial(self, event: PartialImage) -> JSON:
        request = self.asked.request
        return {
            "background": request.background or "auto",
            "output_format": request.output_format or FORMATS.get(event.media_type),
            "quality": request.quality or "auto",
            "size": request.size or "auto",
        }

    def end(self) -> bytes:
        return b""  # OpenAI's image stream ends with its completed events, no [DONE]

    def failure(self, error: ParleyError) -> bytes | None:
        return json_event({"type": "error", **error.body()}, "error")

    def delivered(self) -> Usage | None:
        if not self._finished and not self._partials:
            return None
        if not self._finished and self.per_image:
            return None  # previews only: no image was made
        return self.usage_of(self._finished, self._partials)


def _reported(replies: Sequence[ImageReply], images: int, grade: Grade) -> Usage | None:
    """The upstreams' token reports added up, each checked (``None`` when any image's
    reply carried none, or one that is not a report)."""
    totals = [0, 0, 0]
    reports = [reply.usage for reply in replies if reply.usage is not None]
    if not reports:
        return None
    for report in reports:
        counts = _counts(report)
        if counts is None:
            return None
        for index, count in enumerate(counts):
            totals[index] += count
    prompt, completion, image_tokens = totals
    return Usage(
        prompt_tokens=prompt,
        completion_tokens=completion,
        images=images,
        image_grade=grade,
        image_tokens=min(image_tokens, prompt),
    )


def _counts(report: JSON) -> tuple[int, int, int] | None:
    names = ("input_tokens", "output_tokens")
    counts = reported_counts(
        {name: report.get(name) for name in names}, source="the upstream", required=names
    )
    if counts is None:
        return None
    details = report.get("input_tokens_details")
    image = details.get("image_tokens") if isinstance(details, dict) else None
    checked = reported_counts({"image_tokens": image}, source="the upstream", required=())
    if checked is None:
        return None
    return counts["input_tokens"], counts["output_tokens"], checked["image_tokens"]


def stated_usage(usage: Usage) -> JSON:
    """OpenAI's ``usage`` of an image call, for what was billed, and the images made."""
    text = max(usage.prompt_tokens - usage.image_tokens, 0)
    return {
        "input_tokens": usage.prompt_tokens,
        "input_tokens_details": {"text_tokens": text, "image_tokens": usage.image_tokens},
        "output_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens,
        "images": usage.images,
    }
