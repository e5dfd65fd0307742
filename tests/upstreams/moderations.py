"""A fake OpenAI-compatible moderation engine: ``POST /v1/moderations``, written from
OpenAI's reference (``{input, model?}``; ``{id, model, results: [{flagged, categories,
category_scores, category_applied_input_types}]}``, one result per input, with every
category key; no usage).

The input may be a string, strings, or parts (``text``, ``image_url``). A result is
flagged for violence when its text holds "attack", and its image parts are applied to
the categories images can be (self-harm, sexual, violence). Strings get one result each;
parts are one input, one result. Knobs: ``fail`` (a status to answer with instead),
``usage`` (add OpenAI-style ``usage``, as some compatible servers do), ``garbled``
(``results`` that is not a list).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aiohttp import web

from tests.upstreams.server import FakeServer, authorized, json_reply, openai_error, received

JSON = dict[str, Any]
CATEGORIES = (
    "harassment",
    "harassment/threatening",
    "hate",
    "hate/threatening",
    "illicit",
    "illicit/violent",
    "self-harm",
    "self-harm/instructions",
    "self-harm/intent",
    "sexual",
    "sexual/minors",
    "violence",
    "violence/graphic",
)
IMAGE_CATEGORIES = frozenset(
    {"self-harm", "self-harm/instructions", "self-harm/intent", "sexual", "violence",
     "violence/graphic"}
)  # fmt: skip


def result(texts: list[str], images: int) -> JSON:
    violent = any("attack" in text.lower() for text in texts)
    kinds = (["text"] if texts else []) + (["image"] if images else [])
    return {
        "flagged": violent,
        "categories": {name: violent and name == "violence" for name in CATEGORIES},
        "category_scores": {
            name: 0.91 if violent and name == "violence" else 0.001 for name in CATEGORIES
        },
        "category_applied_input_types": {
            name: [kind for kind in kinds if kind == "text" or name in IMAGE_CATEGORIES]
            for name in CATEGORIES
        },
    }


@dataclass
class FakeModerations(FakeServer):
    api_key: str | None = None
    fail: int | None = None
    usage: bool = False
    garbled: bool = False

    def application(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/moderations", self._moderate)
        return app

    async def _moderate(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.requests.append(received(request, body))
        if not authorized(request, self.api_key):
            return json_reply(401, openai_error("Incorrect API key.", "invalid_request_error"))
        if self.fail is not None:
            return json_reply(self.fail, openai_error("overloaded", "server_error"))
        inputs = body.get("input")
        if isinstance(inputs, str):
            results = [result([inputs], 0)]
        elif all(isinstance(item, str) for item in inputs):
            results = [result([item], 0) for item in inputs]
        else:
            texts = [part["text"] for part in inputs if part["type"] == "text"]
            results = [result(texts, sum(part["type"] == "image_url" for part in inputs))]
        reply: JSON = {
            "id": "modr-5558",
            "model": body.get("model"),
            "results": {"oops": True} if self.garbled else results,
        }
        if self.usage:
            reply["usage"] = {"prompt_tokens": 7, "total_tokens": 7}
        return json_reply(200, reply)
