"""A fake Deepgram over real HTTP and a real WebSocket, written from Deepgram's public API
reference (``/work/shared/spec/new-surfaces.md`` §6: developers.deepgram.com and the
official Python SDK's types).

    async with FakeDeepgram(api_key="dg-key") as deepgram:
        deepgram.base_url      # "http://127.0.0.1:<port>/v1"
        deepgram.uploads       # every listen call (ReceivedUpload: the query as fields)
        deepgram.speeches      # every speak call (Spoken: query, headers, JSON body)

Every route wants ``Authorization: Token <key>`` (a wrong or missing one is 401
``INVALID_AUTH``). Errors are Deepgram's ``{"err_code", "err_msg", "request_id"}``.

- ``POST /v1/listen``: the body is the raw audio under an audio media type
  (``application/json`` would be a ``{"url"}`` body, which this fake does not fetch: 400).
  Booleans in the query must be ``true`` or ``false``. The audio is decoded with PyAV
  (``transcript_script``), so durations are real; undecodable audio is Deepgram's 400
  "failed to process audio: corrupt or unsupported data". The reply is
  ``{"metadata": {..., "duration"}, "results": {"channels": [{"alternatives":
  [{"transcript", "confidence", "words": [{"word", "start", "end", "confidence",
  "punctuated_word"}]}]}], "utterances"?}}``; one utterance per script segment with
  ``utterances=true``. Without ``punctuate`` and ``smart_format`` the transcript is lower
  case and unpunctuated, and words have no ``punctuated_word``.
- ``GET /v1/listen`` upgraded to a WebSocket (live): audio arrives as binary frames, JSON
  text frames ``KeepAlive``, ``Finalize`` and ``CloseStream``. On ``CloseStream`` the audio
  received is decoded and each segment is sent as a final ``Results`` message (preceded by
  an interim one when ``interim_results=true``), then ``UtteranceEnd`` and ``Metadata``,
  then a normal close (1000). Audio that cannot be decoded closes with 1008 and the
  reason ``DATA-0000``. A refused handshake is an HTTP answer with a JSON error body.
- ``POST /v1/speak``: JSON ``{"text"}`` only (at most 2,000 characters); ``model`` must be
  a listed Aura voice; ``encoding`` in ``linear16 mulaw alaw mp3 opus flac aac``;
  ``container`` ``wav``/``none`` for linear16, mulaw and alaw, ``ogg``/``none`` for opus,
  ``none`` otherwise; ``sample_rate`` only for linear16, mulaw, alaw (8000 to 48000) and
  flac; ``speed`` 0.7 to 1.5. Defaults as Deepgram's REST: linear16 in WAV at 24 kHz.
  The reply is chunked audio bytes (a tone of ``SECONDS_PER_CHARACTER`` a character)
  with ``dg-request-id``, ``dg-model-name`` and ``dg-char-count``.
- ``GET /v1/models``: ``{"stt": [...], "tts": [{"name", "canonical_name", "architecture",
  "languages", "version", "uuid", "metadata"}]}``.

Knobs in the model name, ``+``-separated (the listen ``model``, or the speak ``model``):
``fail-N`` (answer status N; with ``retry-after-S``, a ``retry-after: S`` header),
``hang-S`` (wait S s first), ``slow-S`` (wait S s before each live message),
``claim-S`` (``metadata.duration`` says S seconds, whatever the audio lasts),
``error-after-N`` (live: close with 1011 after N results), ``stall-after-N`` (live: N
results, then silence for ``MAX_HANG`` s), ``drop-after-N`` (speak: N chunks, then the
connection is cut). With ``leak=True`` the errors quote the request's ``Authorization``
header, as a careless proxy in front of the engine would.
"""

from __future__ import annotations

import asyncio
import io
import uuid
from dataclasses import dataclass, field

import av
import orjson
from aiohttp import WSMsgType, web
from multidict import CIMultiDict, MultiDict

from tests.upstreams.server import FakeServer, json_reply
from tests.upstreams.tones import sine, wav
from tests.upstreams.transcribers import ReceivedUpload
from tests.upstreams.transcript_script import JSON, Script, Undecodable, script_for

MAX_HANG = 30.0
MAX_TEXT = 2000
SECONDS_PER_CHARACTER = 0.02
CHUNK = 4096
MODEL_UUID = "1dbdfb4d-85b2-4659-9c8f-8a2e8d0ab4f1"
AURA_VOICES = (
    ("thalia", "aura-2-thalia-en", "en"),
    ("andromeda", "aura-2-andromeda-en", "en"),
    ("apollo", "aura-2-apollo-en", "en"),
    ("celeste", "aura-2-celeste-es", "es"),
    ("asteria", "aura-asteria-en", "en"),
)
VOICE_NAMES = frozenset(canonical for _, canonical, _ in AURA_VOICES)
ENCODINGS = frozenset({"linear16", "mulaw", "alaw", "mp3", "opus", "flac", "aac"})
CONTAINERS = {
    "linear16": {"wav", "none"},
    "mulaw": {"wav", "none"},
    "alaw": {"wav", "none"},
    "opus": {"ogg", "none"},
}
PCM_RATES = frozenset({8000, 16000, 24000, 32000, 48000})
FLAC_RATES = frozenset({8000, 16000, 22050, 32000, 48000})
FIXED_RATES = {"mp3": 22050, "aac": 22050, "opus": 48000}
MEDIA_TYPES = {
    "mp3": "audio/mpeg",
    "opus": "audio/ogg",
    "flac": "audio/flac",
    "aac": "audio/aac",
    "wav": "audio/wav",
}
LISTEN_FLAGS = ("punctuate", "smart_format", "utterances", "interim_results", "diarize")
CONFIDENCE = 0.98


@dataclass(frozen=True, slots=True)
class Spoken:
    query: MultiDict[str]
    headers: CIMultiDict[str]
    body: JSON


def knob(model: str, name: str) -> str | None:
    for part in model.split("+"):
        found, _, value = part.rpartition("-")
        if found == name:
            return value
    return None


def error_body(code: str, message: str) -> JSON:
    return {"err_code": code, "err_msg": message, "request_id": str(uuid.uuid4())}


def _plain(text: str) -> str:
    """What Deepgram writes without punctuation or formatting: lower case, bare words."""
    return " ".join(word.strip(".,").lower() for word in text.split())


def results_words(script: Script, punctuated: bool) -> list[JSON]:
    found = []
    for word in script.words:
        item: JSON = {
            "word": word["word"].strip(".,").lower(),
            "start": word["start"],
            "end": word["end"],
            "confidence": CONFIDENCE,
        }
        if punctuated:
            item["punctuated_word"] = word["word"]
        found.append(item)
    return found


def segment_words(words: list[JSON], start: float, end: float) -> list[JSON]:
    return [w for w in words if start <= w["start"] < end]


@dataclass
class FakeDeepgram(FakeServer):
    api_key: str | None = None
    leak: bool = False
    flavour: str = "deepgram"
    uploads: list[ReceivedUpload] = field(default_factory=list)
    speeches: list[Spoken] = field(default_factory=list)
    completed_streams: int = 0
    live_frames: int = 0
    """Binary frames received over every live socket."""

    def application(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/listen", self._listen)
        app.router.add_get("/v1/listen", self._live)
        app.router.add_post("/v1/speak", self._speak)
        app.router.add_get("/v1/models", self._models)
        return app

    @property
    def last(self) -> ReceivedUpload:
        return self.uploads[-1]

    # shared

    def _refused(self, request: web.Request) -> web.Response | None:
        """401 unless the request carries ``Authorization: Token <key>``."""
        header = request.headers.get("Authorization", "")
        if self.api_key is None or header == f"Token {self.api_key}":
            return None
        quoted = f" (Authorization: {header})" if self.leak else ""
        return json_reply(401, error_body("INVALID_AUTH", f"Invalid credentials.{quoted}"))

    def _failure(self, request: web.Request, model: str) -> web.Response | None:
        status = knob(model, "fail")
        if status is None:
            return None
        quoted = f" (Authorization: {request.headers.get('Authorization')})" if self.leak else ""
        failed = json_reply(
            int(status),
            error_body("FAKE_FAILURE", f"Fake engine failure (status {status}).{quoted}"),
        )
        retry_after = knob(model, "retry-after")
        if retry_after is not None:
            failed.headers["retry-after"] = retry_after
        return failed

    @staticmethod
    def _bad_flags(query: MultiDict[str]) -> web.Response | None:
        for name in LISTEN_FLAGS:
            value = query.get(name)
            if value is not None and value not in ("true", "false"):
                return json_reply(
                    400, error_body("INVALID_QUERY_PARAMETER", f"Invalid value for {name}")
                )
        return None

    # prerecorded

    async def _listen(self, request: web.Request) -> web.Response:
        body = await request.read()
        query = MultiDict(request.query)
        self.uploads.append(
            ReceivedUpload(
                request.path,
                CIMultiDict(request.headers),
                query,
                body,
                None,
                request.headers.get("Content-Type"),
            )
        )
        refused = self._refused(request) or self._bad_flags(query)
        if refused is not None:
            return refused
        model = query.get("model", "base")
        failed = self._failure(request, model)
        if failed is not None:
            return failed
        kind = request.headers.get("Content-Type", "")
        if kind.startswith("application/json"):
            return json_reply(
                400, error_body("Bad Request", "Bad Request: failed to fetch the url")
            )
        if not body:
            return json_reply(400, error_body("Bad Request", "Bad Request: no audio"))
        try:
            script = script_for(body, "transcribe", query.get("language"), 0.0)
        except Undecodable:
            return json_reply(
                400,
                error_body(
                    "Bad Request",
                    "Bad Request: failed to process audio: corrupt or unsupported data",
                ),
            )
        hang = knob(model, "hang")
        if hang is not None:
            await asyncio.sleep(min(float(hang), MAX_HANG))
        return json_reply(200, self._prerecorded(script, query))

    def _prerecorded(self, script: Script, query: MultiDict[str]) -> JSON:
        punctuated = query.get("punctuate") == "true" or query.get("smart_format") == "true"
        words = results_words(script, punctuated)
        text = script.text if punctuated else _plain(script.text)
        results: JSON = {
            "channels": [
                {"alternatives": [{"transcript": text, "confidence": CONFIDENCE, "words": words}]}
            ]
        }
        if query.get("utterances") == "true":
            results["utterances"] = [
                {
                    "start": s["start"],
                    "end": s["end"],
                    "confidence": CONFIDENCE,
                    "channel": 0,
                    "transcript": s["text"].strip() if punctuated else _plain(s["text"]),
                    "words": segment_words(words, s["start"], s["end"]),
                    "id": str(uuid.uuid4()),
                }
                for s in script.segments
            ]
        return {"metadata": self._metadata(script, query), "results": results}

    @staticmethod
    def _metadata(script: Script, query: MultiDict[str]) -> JSON:
        return {
            "transaction_key": "deprecated",
            "request_id": str(uuid.uuid4()),
            "sha256": "0" * 64,
            "created": "2026-11-28T21:00:00.000Z",
            "duration": float(knob(query.get("model", ""), "claim") or round(script.duration, 3)),
            "channels": 1,
            "models": [MODEL_UUID],
            "model_info": {
                MODEL_UUID: {
                    "name": query.get("model", "base"),
                    "version": "2026-01-01",
                    "arch": "nova-3",
                }
            },
        }

    # live

    async def _live(self, request: web.Request) -> web.StreamResponse:
        query = MultiDict(request.query)
        refused = self._refused(request) or self._bad_flags(query)
        model = query.get("model", "base")
        failed = refused or self._failure(request, model)
        if failed is not None:
            return failed
        if "encoding" in query or "sample_rate" in query:
            return json_reply(
                400,
                error_body("Bad Request", "encoding is for raw audio; this fake takes containers"),
            )
        self.uploads.append(
            ReceivedUpload(request.path, CIMultiDict(request.headers), query, None, None, None)
        )
        socket = web.WebSocketResponse(autoping=True)
        await socket.prepare(request)
        audio = bytearray()
        async for message in socket:
            if message.type == WSMsgType.BINARY:
                self.live_frames += 1
                audio += message.data
            elif message.type == WSMsgType.TEXT:
                control = orjson.loads(message.data)
                if control.get("type") == "CloseStream":
                    await self._finish(socket, bytes(audio), query)
                    break
        return socket

    async def _finish(
        self, socket: web.WebSocketResponse, audio: bytes, query: MultiDict[str]
    ) -> None:
        model = query.get("model", "base")
        try:
            script = script_for(audio, "transcribe", query.get("language"), 0.0)
        except Undecodable:
            await socket.close(
                code=1008, message=b"DATA-0000: the payload cannot be decoded as audio"
            )
            return
        hang = knob(model, "hang")
        if hang is not None:
            await asyncio.sleep(min(float(hang), MAX_HANG))
        punctuated = query.get("punctuate") == "true" or query.get("smart_format") == "true"
        words = results_words(script, punctuated)
        delay = float(knob(model, "slow") or 0)
        error_after = knob(model, "error-after")
        stall_after = knob(model, "stall-after")
        for index, s in enumerate(script.segments):
            if error_after is not None and index == int(error_after):
                await socket.close(code=1011, message=b"NET-0000: internal error")
                return
            if stall_after is not None and index == int(stall_after):
                await asyncio.sleep(MAX_HANG)
            text = s["text"].strip() if punctuated else _plain(s["text"])
            finals = [False, True] if query.get("interim_results") == "true" else [True]
            for final in finals:
                if delay:
                    await asyncio.sleep(min(delay, MAX_HANG))
                shown = text if final else text.split()[0]
                await socket.send_str(orjson.dumps(self._results(s, shown, words, final)).decode())
        await socket.send_str(
            orjson.dumps(
                {"type": "UtteranceEnd", "channel": [0, 1], "last_word_end": script.duration}
            ).decode()
        )
        metadata = {"type": "Metadata", **self._metadata(script, query)}
        await socket.send_str(orjson.dumps(metadata).decode())
        self.completed_streams += 1
        await socket.close(code=1000)

    @staticmethod
    def _results(s: JSON, text: str, words: list[JSON], final: bool) -> JSON:
        return {
            "type": "Results",
            "channel_index": [0, 1],
            "duration": round(s["end"] - s["start"], 3),
            "start": s["start"],
            "is_final": final,
            "speech_final": final,
            "from_finalize": False,
            "channel": {
                "alternatives": [
                    {
                        "transcript": text,
                        "confidence": CONFIDENCE,
                        "words": segment_words(words, s["start"], s["end"]),
                    }
                ]
            },
            "metadata": {
                "request_id": str(uuid.uuid4()),
                "model_uuid": MODEL_UUID,
                "model_info": {"name": "nova-3", "version": "2026-01-01", "arch": "nova-3"},
            },
        }

    # speak

    async def _speak(self, request: web.Request) -> web.StreamResponse:
        query = MultiDict(request.query)
        try:
            body = orjson.loads(await request.read())
        except orjson.JSONDecodeError:
            body = None
        self.speeches.append(
            Spoken(query, CIMultiDict(request.headers), body if isinstance(body, dict) else {})
        )
        refused = self._refused(request)
        if refused is not None:
            return refused
        model = query.get("model", "aura-asteria-en")
        failed = self._failure(request, model)
        if failed is not None:
            return failed
        problem = self._speak_problem(request, query, body)
        if problem is not None:
            return json_reply(400, error_body("INVALID_QUERY_PARAMETER", problem))
        assert isinstance(body, dict)
        if len(body["text"]) > MAX_TEXT:
            return json_reply(
                413,
                error_body("PAYLOAD_TOO_LARGE", f"Input text exceeds {MAX_TEXT} characters."),
            )
        encoding = query.get("encoding", "linear16")
        rate = int(query.get("sample_rate", FIXED_RATES.get(encoding, 24000)))
        speed = float(query.get("speed", "1"))
        seconds = max(0.4, len(body["text"]) * SECONDS_PER_CHARACTER / speed)
        audio, media_type = self._audio(encoding, query.get("container"), rate, seconds)
        hang = knob(model, "hang")
        if hang is not None:
            await asyncio.sleep(min(float(hang), MAX_HANG))
        response = web.StreamResponse(
            headers={
                "Content-Type": media_type,
                "dg-request-id": str(uuid.uuid4()),
                "dg-model-name": model,
                "dg-model-uuid": MODEL_UUID,
                "dg-char-count": str(len(body["text"])),
            }
        )
        response.enable_chunked_encoding()
        await response.prepare(request)
        drop_after = knob(model, "drop-after")
        for index, start in enumerate(range(0, len(audio), CHUNK)):
            if drop_after is not None and index == int(drop_after):
                assert request.transport is not None
                request.transport.close()
                return response
            await response.write(audio[start : start + CHUNK])
        await response.write_eof()
        return response

    @staticmethod
    def _speak_problem(request: web.Request, query: MultiDict[str], body: object) -> str | None:
        if not request.headers.get("Content-Type", "").startswith("application/json"):
            return "The body must be JSON."
        if not isinstance(body, dict) or set(body) != {"text"} or not isinstance(body["text"], str):
            return 'The body must be {"text": "..."} and nothing else.'
        if not body["text"].strip():
            return "Input text is empty."
        model = query.get("model", "aura-asteria-en").split("+", 1)[0]
        if model not in VOICE_NAMES:
            return f"No such model: {model}"
        encoding = query.get("encoding", "linear16")
        if encoding not in ENCODINGS:
            return f"Unsupported encoding: {encoding}"
        container = query.get("container")
        if container is not None and container not in CONTAINERS.get(encoding, {"none"}):
            return f"Container {container} is not supported for encoding {encoding}"
        if "sample_rate" in query:
            allowed = FLAC_RATES if encoding == "flac" else PCM_RATES
            if encoding in FIXED_RATES or int(query["sample_rate"]) not in allowed:
                return f"Sample rate {query['sample_rate']} is not supported for {encoding}"
        if "speed" in query and not 0.7 <= float(query["speed"]) <= 1.5:
            return "speed must be between 0.7 and 1.5"
        return None

    @staticmethod
    def _audio(
        encoding: str, container: str | None, rate: int, seconds: float
    ) -> tuple[bytes, str]:
        pcm = sine(seconds, rate)
        if encoding == "linear16":
            if container == "none":
                return pcm, "application/octet-stream"
            return wav(pcm, rate), MEDIA_TYPES["wav"]
        if encoding in ("mulaw", "alaw"):
            return _encoded(pcm, rate, "wav", f"pcm_{encoding}"), MEDIA_TYPES["wav"]
        muxers = {
            "mp3": ("mp3", "libmp3lame"),
            "opus": ("ogg", "libopus"),
            "flac": ("flac", "flac"),
            "aac": ("adts", "aac"),
        }
        muxer, codec = muxers[encoding]
        return _encoded(pcm, rate, muxer, codec, FIXED_RATES.get(encoding)), MEDIA_TYPES[encoding]

    # models

    async def _models(self, request: web.Request) -> web.Response:
        refused = self._refused(request)
        if refused is not None:
            return refused
        tts = [
            {
                "name": name,
                "canonical_name": canonical,
                "architecture": canonical.rsplit("-", 2)[0],
                "languages": [language],
                "version": "2025-04-07.0",
                "uuid": str(uuid.uuid5(uuid.NAMESPACE_URL, canonical)),
                "metadata": {"accent": "American", "age": "Adult", "tags": ["warm"]},
            }
            for name, canonical, language in AURA_VOICES
        ]
        stt = [
            {
                "name": "nova-3",
                "canonical_name": "nova-3",
                "architecture": "nova-3",
                "languages": ["en", "de"],
                "version": "2026-01-01",
                "uuid": MODEL_UUID,
                "batch": True,
                "streaming": True,
                "formatted_output": True,
            }
        ]
        return json_reply(200, {"stt": stt, "tts": tts})


def _encoded(pcm: bytes, rate: int, muxer: str, codec: str, out_rate: int | None = None) -> bytes:
    """``pcm`` (s16le mono at ``rate``) encoded with PyAV by ``codec`` in ``muxer``."""
    target = out_rate or rate
    buffer = io.BytesIO()
    with av.open(buffer, mode="w", format=muxer) as output:
        stream = output.add_stream(codec, rate=target)
        stream.layout = "mono"  # type: ignore[union-attr]
        resampler = av.AudioResampler(layout="mono", rate=target)
        frame = av.AudioFrame(format="s16", layout="mono", samples=len(pcm) // 2)
        frame.planes[0].update(pcm)
        frame.sample_rate = rate
        for converted in resampler.resample(frame):
            for packet in stream.encode(converted):  # type: ignore[union-attr]
                output.mux(packet)
        for packet in stream.encode(None):  # type: ignore[union-attr]
            output.mux(packet)
    return buffer.getvalue()
