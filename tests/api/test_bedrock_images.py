"""Images on a Bedrock channel through ``InvokeModel``: Amazon's Titan (and Nova Canvas)
and Stability's models, every request signed and its signature verified by the fake
(``tests/upstreams/bedrock_images.py``)."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.api.harness import Gateway, call, local_state, records, starting
from tests.upstreams.bedrock import AwsKeys, FakeBedrock
from tests.upstreams.openai_images import png

KEYS = AwsKeys("ASIAFAKEACCESS02", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYimage", "FwoGZXIvYXdzEJr//img=")
TITAN = "amazon.titan-image-generator-v2:0"
STABILITY = "stability.stable-image-ultra-v1:1"


def config(endpoint: str, workdir: Path) -> dict[str, Any]:
    aws = {
        "region": "us-east-1",
        "access_key_id": KEYS.access_key_id,
        "secret_access_key": KEYS.secret_access_key,
        "session_token": KEYS.session_token,
    }
    per_image = {"per_image": {"1024x1024/high": "0.01", "*": "0.008"}}
    return {
        **local_state(workdir),
        "channels": [
            {
                "name": "aws",
                "type": "bedrock",
                "base_url": endpoint,
                "aws": aws,
                "models": [
                    {"name": "titan", "upstream": TITAN},
                    {"name": "ultra", "upstream": STABILITY},
                    {"name": "ultra-touchy", "upstream": f"{STABILITY}+filter"},
                ],
                "timeouts": {"connect": 2, "read": 5},
            }
        ],
        "models": [
            {"name": name, "kind": "image", "prices": per_image}
            for name in ("titan", "ultra", "ultra-touchy")
        ],
    }


@pytest.fixture
async def upstream() -> AsyncIterator[FakeBedrock]:
    async with FakeBedrock(credentials=KEYS, region="us-east-1") as running:
        yield running


@pytest.fixture
async def gateway(upstream: FakeBedrock, tmp_path: Path) -> AsyncIterator[Gateway]:
    async with starting(lambda: config(upstream.endpoint, tmp_path)) as start:
        yield await start()


@pytest.fixture
async def key(gateway: Gateway) -> str:
    return await gateway.key(await gateway.group("team"))


async def test_titan_makes_n_images_signed_and_billed_per_image(
    gateway: Gateway, key: str, upstream: FakeBedrock
) -> None:
    reply = await gateway.client(key).images.generate(
        model="titan", prompt="a red barn", n=2, size="1024x1024", quality="high"
    )
    decoded = [base64.b64decode(item.b64_json or "") for item in reply.data or []]
    assert decoded == [png("a red barn#0"), png("a red barn#1")]
    sent = upstream.last_request
    assert sent.path == f"/model/{TITAN}/invoke"
    assert sent.headers["Authorization"].startswith("AWS4-HMAC-SHA256 Credential=ASIAFAKE")
    assert sent.body == {
        "taskType": "TEXT_IMAGE",
        "textToImageParams": {"text": "a red barn"},
        "imageGenerationConfig": {
            "numberOfImages": 2,
            "width": 1024,
            "height": 1024,
            "quality": "premium",
        },
    }
    (record,) = await records(gateway)
    assert (record.status, record.cost_nanos) == (200, 2 * 10_000_000)


async def test_a_titan_edit_is_an_image_variation(
    gateway: Gateway, key: str, upstream: FakeBedrock
) -> None:
    await gateway.client(key).images.edit(
        model="titan", prompt="in winter", image=("barn.png", png("barn"))
    )
    body = upstream.last_request.body
    assert body["taskType"] == "IMAGE_VARIATION"
    assert body["imageVariationParams"]["text"] == "in winter"
    assert [base64.b64decode(image) for image in body["imageVariationParams"]["images"]] == [
        png("barn")
    ]


async def test_stability_draws_at_the_nearest_ratio_and_edits_image_to_image(
    gateway: Gateway, key: str, upstream: FakeBedrock
) -> None:
    reply = await gateway.client(key).images.generate(
        model="ultra", prompt="a comet", size="1536x1024", output_format="webp"
    )
    assert base64.b64decode((reply.data or [])[0].b64_json or "") == png("a comet#0")
    assert upstream.last_request.body == {
        "prompt": "a comet",
        "mode": "text-to-image",
        "aspect_ratio": "3:2",
        "output_format": "webp",
    }
    await gateway.client(key).images.edit(model="ultra", prompt="x", image=("a.png", png("a")))
    assert upstream.last_request.body["mode"] == "image-to-image"
    assert base64.b64decode(upstream.last_request.body["image"]) == png("a")


async def test_a_filtered_stability_prompt_is_a_400_billed_nothing(
    gateway: Gateway, key: str
) -> None:
    body = {"model": "ultra-touchy", "prompt": "x"}
    status, reply = await call(gateway, "POST", "/v1/images/generations", key, json=body)
    assert status == 400 and reply["error"]["code"] == "content_policy_violation"
    (record,) = await records(gateway)
    assert (record.status, record.cost_nanos) == (400, 0)


@pytest.mark.parametrize(
    ("model", "body", "param"),
    [
        ("ultra", {"n": 2}, "n"),
        ("ultra", {"quality": "hd"}, "quality"),
        ("titan", {"output_format": "jpeg"}, "output_format"),
        ("titan", {"background": "transparent"}, "background"),
        ("titan", {"style": "vivid"}, "style"),
    ],
)
async def test_what_bedrock_cannot_say_is_a_400_naming_it(
    gateway: Gateway, key: str, upstream: FakeBedrock, model: str, body: dict[str, Any], param: str
) -> None:
    status, reply = await call(
        gateway, "POST", "/v1/images/generations", key, json={"model": model, "prompt": "x", **body}
    )
    assert status == 400 and reply["error"]["param"] == param
    assert upstream.requests == []


async def test_a_mask_is_refused_before_bedrock_is_called(
    gateway: Gateway, key: str, upstream: FakeBedrock
) -> None:
    form = aiohttp_form(png("a"), png("m"))
    status, reply = await call(gateway, "POST", "/v1/images/edits", key, data=form)
    assert status == 400 and reply["error"]["param"] == "mask"
    assert upstream.requests == []


async def test_a_size_titan_does_not_make_is_bedrocks_400_relayed(
    gateway: Gateway, key: str
) -> None:
    body = {"model": "titan", "prompt": "x", "size": "1000x1000"}
    status, reply = await call(gateway, "POST", "/v1/images/generations", key, json=body)
    assert status == 400
    assert "dimensions" in reply["error"]["message"]
    assert KEYS.secret_access_key not in str(reply)


def aiohttp_form(image: bytes, mask: bytes) -> aiohttp.FormData:
    form = aiohttp.FormData()
    form.add_field("model", "titan")
    form.add_field("prompt", "x")
    form.add_field("image", image, filename="a.png", content_type="image/png")
    form.add_field("mask", mask, filename="m.png", content_type="image/png")
    return form
