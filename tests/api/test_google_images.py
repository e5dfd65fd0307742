"""Images on Google's channels: Imagen's ``predict`` and Gemini image output through
``generateContent``, on the Gemini API (``type: gemini``) and Vertex AI (``type:
vertex``), against the fakes written from Google's references
(``tests/upstreams/google_images.py``)."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import openai
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from parley.domain.pricing import Price, usd_to_nanos
from tests.api.harness import CHANNEL_KEY, Gateway, call, local_state, records, starting
from tests.api.test_vertex_channel import EMAIL, make_key, service_account
from tests.upstreams.gemini import FakeGemini
from tests.upstreams.google_images import IMAGE_INPUT_TOKENS, IMAGE_OUTPUT_TOKENS
from tests.upstreams.openai_images import png
from tests.upstreams.vertex import FakeVertex

PER_IMAGE = {"per_image": {"*": "0.04"}}
TOKENS = {"input_per_1k": "0.0003", "image_input_per_1k": "0.0003", "output_per_1k": "0.03"}
TOKEN_PRICE = Price(
    input_per_1k=usd_to_nanos("0.0003"),
    image_input_per_1k=usd_to_nanos("0.0003"),
    output_per_1k=usd_to_nanos("0.03"),
)


def config(gemini: FakeGemini, vertex: FakeVertex, credentials: Path, workdir: Path) -> Any:
    return {
        **local_state(workdir),
        "channels": [
            {
                "name": "google",
                "type": "gemini",
                "base_url": gemini.base_url,
                "api_key": CHANNEL_KEY,
                "models": [
                    {"name": "imagen", "upstream": "imagen-4.0-generate-001"},
                    {"name": "imagen-touchy", "upstream": "imagen-4.0-generate-001+filter-1"},
                    {"name": "imagen-blocked", "upstream": "imagen-4.0-generate-001+filter"},
                    {"name": "nano", "upstream": "gemini-2.5-flash-image"},
                ],
                "timeouts": {"connect": 2, "read": 5},
            },
            {
                "name": "gcp",
                "type": "vertex",
                "base_url": vertex.base_url,
                "vertex": {
                    "project": vertex.project,
                    "region": vertex.region,
                    "credentials_file": str(credentials),
                },
                "models": [{"name": "vertex-imagen", "upstream": "imagen-3.0-generate-002"}],
                "timeouts": {"connect": 2, "read": 5},
            },
        ],
        "models": [
            *(
                {"name": name, "kind": "image", "prices": PER_IMAGE}
                for name in ("imagen", "imagen-touchy", "imagen-blocked", "vertex-imagen")
            ),
            {"name": "nano", "kind": "image", "prices": TOKENS},
        ],
    }


@pytest.fixture
async def gemini() -> AsyncIterator[FakeGemini]:
    async with FakeGemini(api_key=CHANNEL_KEY) as running:
        yield running


@pytest.fixture
async def vertex() -> AsyncIterator[FakeVertex]:
    async with FakeVertex(KEY.public_key(), EMAIL) as running:
        yield running


KEY: rsa.RSAPrivateKey = make_key()


@pytest.fixture
async def gateway(gemini: FakeGemini, vertex: FakeVertex, tmp_path: Path) -> AsyncIterator[Gateway]:
    credentials = service_account(KEY, vertex.token_uri, tmp_path / "sa.json")
    async with starting(lambda: config(gemini, vertex, credentials, tmp_path)) as start:
        yield await start()


@pytest.fixture
async def key(gateway: Gateway) -> str:
    return await gateway.key(await gateway.group("team"))


async def test_imagen_makes_n_images_at_the_nearest_aspect_ratio_billed_per_image(
    gateway: Gateway, key: str, gemini: FakeGemini
) -> None:
    reply = await gateway.client(key).images.generate(
        model="imagen", prompt="a desert road", n=2, size="1792x1024", output_format="jpeg"
    )
    assert len(reply.data or []) == 2
    assert all(
        base64.b64decode(item.b64_json or "")[:3] == b"\xff\xd8\xff" for item in reply.data or []
    )
    assert reply.output_format == "jpeg"
    sent = gemini.last_request
    assert sent.path == "/v1beta/models/imagen-4.0-generate-001:predict"
    assert sent.headers["x-goog-api-key"] == CHANNEL_KEY
    assert sent.body == {
        "instances": [{"prompt": "a desert road"}],
        "parameters": {
            "sampleCount": 2,
            "aspectRatio": "16:9",
            "outputOptions": {"mimeType": "image/jpeg"},
        },
    }
    (record,) = await records(gateway)
    assert (record.model, record.status, record.cost_nanos) == ("imagen", 200, 2 * 40_000_000)


async def test_a_filtered_prediction_is_left_out_and_not_billed(gateway: Gateway, key: str) -> None:
    reply = await gateway.client(key).images.generate(model="imagen-touchy", prompt="x", n=2)
    assert [base64.b64decode(item.b64_json or "") for item in reply.data or []] == [png("x#1")]
    assert reply.usage is not None and reply.usage.model_extra == {"images": 1}
    (record,) = await records(gateway)
    assert record.cost_nanos == 40_000_000


async def test_a_prompt_imagen_blocks_is_a_400_billed_nothing(gateway: Gateway, key: str) -> None:
    status, body = await call(
        gateway,
        "POST",
        "/v1/images/generations",
        key,
        json={"model": "imagen-blocked", "prompt": "x"},
    )
    assert status == 400
    assert body["error"]["code"] == "content_policy_violation"
    assert "violate" in body["error"]["message"]
    (record,) = await records(gateway)
    assert (record.status, record.cost_nanos) == (400, 0)


async def test_a_gemini_image_model_edits_by_instruction_billed_by_its_tokens(
    gateway: Gateway, key: str, gemini: FakeGemini
) -> None:
    reply = await gateway.client(key).images.edit(
        model="nano", prompt="make it blue", image=("a.png", png("a")), size="1024x1024"
    )
    assert base64.b64decode((reply.data or [])[0].b64_json or "") == png("make it blue#0")
    body = gemini.last_request.body
    assert gemini.last_request.path == "/v1beta/models/gemini-2.5-flash-image:generateContent"
    (turn,) = body["contents"]
    assert turn["parts"][0] == {"text": "make it blue"}
    assert base64.b64decode(turn["parts"][1]["inlineData"]["data"]) == png("a")
    assert body["generationConfig"] == {
        "responseModalities": ["TEXT", "IMAGE"],
        "imageConfig": {"aspectRatio": "1:1"},
    }
    usage = reply.usage
    assert usage is not None
    output = 5 + IMAGE_OUTPUT_TOKENS
    assert (usage.input_tokens, usage.output_tokens) == (3 + IMAGE_INPUT_TOKENS, output)
    assert usage.input_tokens_details.image_tokens == IMAGE_INPUT_TOKENS
    (record,) = await records(gateway)
    assert not record.estimated
    assert record.cost_nanos == TOKEN_PRICE.cost(
        prompt_tokens=3 + IMAGE_INPUT_TOKENS,
        image_tokens=IMAGE_INPUT_TOKENS,
        completion_tokens=output,
    )


@pytest.mark.parametrize(
    ("model", "body", "param"),
    [
        ("nano", {"n": 2}, "n"),
        ("nano", {"quality": "hd"}, "quality"),
        ("imagen", {"background": "transparent"}, "background"),
        ("imagen", {"output_format": "webp"}, "output_format"),
        ("imagen", {"style": "vivid"}, "style"),
    ],
)
async def test_what_google_cannot_say_is_a_400_naming_it(
    gateway: Gateway, key: str, gemini: FakeGemini, model: str, body: dict[str, Any], param: str
) -> None:
    status, reply = await call(
        gateway, "POST", "/v1/images/generations", key, json={"model": model, "prompt": "x", **body}
    )
    assert status == 400 and reply["error"]["param"] == param
    assert gemini.requests == []


async def test_a_stream_from_a_model_that_cannot_stream_is_its_whole_reply(
    gateway: Gateway, key: str
) -> None:
    stream = await gateway.client(key).images.generate(
        model="imagen", prompt="dawn", stream=True, partial_images=2
    )
    events = [event async for event in stream]
    assert [event.type for event in events] == ["image_generation.completed"]
    assert base64.b64decode(events[0].b64_json) == png("dawn#0")


async def test_imagen_on_vertex_goes_to_the_projects_publisher_model(
    gateway: Gateway, key: str, vertex: FakeVertex
) -> None:
    with pytest.raises(openai.BadRequestError):  # Imagen generates only here
        await gateway.client(key).images.edit(
            model="vertex-imagen", prompt="x", image=("a.png", png("a"))
        )
    reply = await gateway.client(key).images.generate(model="vertex-imagen", prompt="a fern")
    assert base64.b64decode((reply.data or [])[0].b64_json or "") == png("a fern#0")
    sent = vertex.last_request
    assert sent.path == (
        f"/v1/projects/{vertex.project}/locations/{vertex.region}"
        "/publishers/google/models/imagen-3.0-generate-002:predict"
    )
    assert sent.headers["Authorization"].startswith("Bearer ya29.fake-")
