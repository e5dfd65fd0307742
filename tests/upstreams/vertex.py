"""A fake Vertex AI, over real HTTP, written from Google Cloud's references (the OAuth 2.0
JWT-bearer flow for service accounts, ``publishers.models.generateContent`` /
``streamGenerateContent``, and Anthropic's ``rawPredict`` / ``streamRawPredict``).

    async with FakeVertex(public_key, "parley@proj.iam.gserviceaccount.com") as vertex:
        vertex.base_url          # "http://127.0.0.1:<port>/v1", a channel's base_url
        vertex.token_uri         # the service account's token_uri
        vertex.mints             # access tokens issued so far

``POST /token`` takes ``grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer`` and an
``assertion``: a JWT whose RS256 signature is checked with the service account's public
key, issued by its email for this ``token_uri`` and the ``cloud-platform`` scope, not
expired. It answers ``{"access_token", "expires_in", "token_type"}`` (``expires_in`` is
``lifetime``); anything else is a 400 ``invalid_grant``.

``POST /v1/projects/{p}/locations/{r}/publishers/google/models/{model}:{method}`` is the
Gemini fake's model (``tests/upstreams/gemini.py``, same knobs); ``publishers/anthropic``
``:rawPredict`` / ``:streamRawPredict`` is the Anthropic fake's, for a body with
``anthropic_version: vertex-2023-10-16`` and no ``model`` (``stream: true`` exactly for
``:streamRawPredict``); ``models/count-tokens:rawPredict`` counts a Messages body that
names its ``model``, as the Anthropic fake counts. ``publishers/google`` ``:predict``
is the text-embeddings API (``predict``, below). Every call needs
``Authorization: Bearer <a token this fake issued, unexpired>`` (else 401
``UNAUTHENTICATED``) and the configured project and region (else 404).
"""

from __future__ import annotations

import base64
import itertools
import time
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPublicKey

from tests.upstreams import google_images
from tests.upstreams.anthropic import FakeAnthropic, error_body
from tests.upstreams.anthropic import _events as anthropic_events
from tests.upstreams.anthropic import _texts as anthropic_texts
from tests.upstreams.gemini import GoogleContent, google_error, stream
from tests.upstreams.server import FakeServer, input_words, json_reply, received

GRANT = "urn:ietf:params:oauth:grant-type:jwt-bearer"
SCOPE = "https://www.googleapis.com/auth/cloud-platform"


@dataclass
class FakeVertex(FakeServer):
    public_key: RSAPublicKey
    client_email: str
    project: str = "parley-test"
    region: str = "us-east5"
    lifetime: int = 3600
    content: GoogleContent = field(default_factory=GoogleContent)
    claude: FakeAnthropic = field(default_factory=FakeAnthropic)
    tokens: dict[str, float] = field(default_factory=dict)
    """Issued token → when it expires (``time.time()``)."""
    _serial: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    @property
    def token_uri(self) -> str:
        return self.base_url.removesuffix("/v1") + "/token"

    @property
    def mints(self) -> int:
        return len(self.tokens)

    def application(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/token", self._token)
        app.router.add_post(
            "/v1/projects/{project}/locations/{region}/publishers/{publisher}/models/{call}",
            self._call,
        )
        return app

    async def _token(self, request: web.Request) -> web.Response:
        form = await request.post()
        if form.get("grant_type") != GRANT or not self._valid(str(form.get("assertion", ""))):
            return json_reply(
                400, {"error": "invalid_grant", "error_description": "Invalid JWT Signature."}
            )
        token = f"ya29.fake-{next(self._serial)}"
        self.tokens[token] = time.time() + self.lifetime
        return json_reply(
            200, {"access_token": token, "expires_in": self.lifetime, "token_type": "Bearer"}
        )

    def _valid(self, assertion: str) -> bool:
        try:
            head, claims, signature = assertion.split(".")
            self.public_key.verify(
                _unb64(signature), f"{head}.{claims}".encode(), padding.PKCS1v15(), hashes.SHA256()
            )
            header, found = orjson.loads(_unb64(head)), orjson.loads(_unb64(claims))
        except (ValueError, InvalidSignature):
            return False
        now = time.time()
        return (
            header.get("alg") == "RS256"
            and found.get("iss") == self.client_email
            and found.get("aud") == self.token_uri
            and found.get("scope") == SCOPE
            and found.get("iat", now + 1000) <= now + 60
            and now < found.get("exp", 0) <= found["iat"] + 3600
        )

    async def _call(self, request: web.Request) -> web.StreamResponse:
        try:
            body: Any = orjson.loads(await request.read())
        except orjson.JSONDecodeError:
            body = None
        self.requests.append(received(request, body))
        token = request.headers.get("Authorization", "").removeprefix("Bearer ")
        if self.tokens.get(token, 0) <= time.time():
            return json_reply(
                401, google_error(401, "Request had invalid authentication credentials.")
            )
        info = request.match_info
        if (info["project"], info["region"]) != (self.project, self.region):
            return json_reply(404, google_error(404, "Project or location not found."))
        model, _, method = info["call"].partition(":")
        if info["publisher"] == "anthropic":
            return await self._claude(request, body, model, method)
        if info["publisher"] != "google":
            return json_reply(404, google_error(404, "Publisher not found."))
        if google_images.answers(model):
            return google_images.answer(body, model, method)
        if method == "predict":
            return predict(body, model)
        return await self.content.answer(request, body, model, method)

    async def _claude(
        self, request: web.Request, body: Any, model: str, method: str
    ) -> web.StreamResponse:
        if method not in ("rawPredict", "streamRawPredict"):
            return json_reply(404, google_error(404, f"Method {method} not found."))
        if not isinstance(body, dict) or body.get("anthropic_version") != "vertex-2023-10-16":
            return json_reply(
                400, error_body("invalid_request_error", "anthropic_version: vertex-2023-10-16")
            )
        if model == "count-tokens":
            if method != "rawPredict" or not isinstance(body.get("model"), str):
                return json_reply(400, error_body("invalid_request_error", "model: required"))
            return json_reply(200, {"input_tokens": input_words(body, anthropic_texts)})
        if "model" in body:
            return json_reply(
                400, error_body("invalid_request_error", "model: Extra inputs are not permitted")
            )
        if (method == "streamRawPredict") != (body.get("stream") is True):
            return json_reply(
                400, error_body("invalid_request_error", "stream: streamRawPredict streams")
            )
        behaviour = self.claude.behaviour.with_model(model)
        if behaviour.fail is not None:
            return json_reply(
                behaviour.fail, error_body("overloaded_error", f"Fake failure ({behaviour.fail}).")
            )
        reply = self.claude._reply({**body, "model": model}, behaviour)
        if method == "rawPredict":
            return json_reply(200, reply)
        return await stream(request, anthropic_events(reply))


TASK_TYPES = frozenset({
    "RETRIEVAL_QUERY", "RETRIEVAL_DOCUMENT", "SEMANTIC_SIMILARITY", "CLASSIFICATION",
    "CLUSTERING", "QUESTION_ANSWERING", "FACT_VERIFICATION", "CODE_RETRIEVAL_QUERY",
})  # fmt: skip


def predict(body: Any, model: str) -> web.Response:
    """The text-embeddings ``predict``: each vector is ``[characters, words, 0.5, ...]``
    of ``parameters.outputDimensionality`` values (3 by default), its ``token_count`` the
    words; ``gemini-embedding-*`` takes one instance a call, others up to 250. An
    ``autoTruncate: false`` instance longer than 20 words is a 400, as Vertex refuses
    an input over the model's limit."""
    instances = body.get("instances") if isinstance(body, dict) else None
    if not isinstance(instances, list) or not instances:
        return json_reply(400, google_error(400, "instances must be a non-empty list."))
    limit = 1 if model.startswith("gemini-embedding") else 250
    if len(instances) > limit:
        return json_reply(400, google_error(400, f"At most {limit} instances per request."))
    parameters = body.get("parameters") or {}
    if set(body) - {"instances", "parameters"} or set(parameters) - {
        "outputDimensionality",
        "autoTruncate",
    }:
        return json_reply(400, google_error(400, "Unknown field in the request."))
    size = parameters.get("outputDimensionality") or 3
    predictions = []
    for instance in instances:
        text = instance.get("content") if isinstance(instance, dict) else None
        if not isinstance(text, str) or set(instance) - {"content", "task_type", "title"}:
            return json_reply(400, google_error(400, "Each instance needs a string content."))
        if instance.get("task_type", "RETRIEVAL_QUERY") not in TASK_TYPES:
            return json_reply(400, google_error(400, "Unknown task_type."))
        words = len(text.split())
        if parameters.get("autoTruncate") is False and words > 20:
            return json_reply(400, google_error(400, "Input is longer than the model's limit."))
        values = [float(len(text)), float(words)] + [0.5] * (size - 2)
        statistics = {"token_count": words, "truncated": False}
        predictions.append({"embeddings": {"values": values[:size], "statistics": statistics}})
    return json_reply(200, {"predictions": predictions, "metadata": {"billableCharacterCount": 9}})


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
