"""POST /v1/images/generations and /v1/images/edits: through the runner to OpenAI-shaped
image engines (``tests/upstreams/openai_images.py``), billed per image or by tokens,
with Parley's own private, expiring URLs, sniffed uploads and streamed partial images."""

from __future__ import annotations

import base64
import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import openai
import pytest

from parley.domain.images import Grade
from parley.domain.pricing import Price, usd_to_nanos
from parley.domain.usage import Allowance
from parley.pipeline.admit import worst_cost
from parley.runtime import image_files
from tests.api.admin_client import ADMIN
from tests.api.admin_client import call as admin_call
from tests.api.harness import CHANNEL_KEY, Gateway, StartGateway, call, records
from tests.upstreams.openai_images import (
    IMAGE_INPUT_TOKENS,
    OUTPUT_TOKENS,
    SIGNATURE,
    FakeImages,
    png,
)

TOKEN_PRICES = {"input_per_1k": "0.005", "image_input_per_1k": "0.01", "output_per_1k": "0.04"}
TOKEN_PRICE = Price(
    input_per_1k=usd_to_nanos("0.005"),
    image_input_per_1k=usd_to_nanos("0.01"),
    output_per_1k=usd_to_nanos("0.04"),
)
PER_IMAGE = {"1024x1024/standard": "0.04", "1024x1024/hd": "0.08", "*": "0.02"}
WEBP = b"RIFF\x24\0\0\0WEBPVP8 " + b"\0" * 24


def with_images(base_url: str, endpoint: str) -> Any:
    def tweak(config: dict[str, Any]) -> None:
        config["server"] = {"max_image_bytes": 1000}
        config["channels"] += [
            {
                "name": "images",
                "base_url": base_url,
                "api_key": CHANNEL_KEY,
                "priority": 1,
                "models": [
                    {"name": "gpt-image", "upstream": "gpt-image-1"},
                    {"name": "dalle", "upstream": "dall-e-3"},
                    {"name": "dalle2", "upstream": "dall-e-2"},
                    {"name": "shaky", "upstream": "gpt-image-1+fail-500"},
                    {"name": "leaky", "upstream": "gpt-image-1+fail-400+leak"},
                    {"name": "html", "upstream": "gpt-image-1+html"},
                    {"name": "html-url", "upstream": "dall-e-2+html"},
                    {"name": "silent", "upstream": "gpt-image-1+no-usage"},
                    {"name": "boastful", "upstream": "gpt-image-1+usage-inflated"},
                    {"name": "cut", "upstream": "gpt-image-1+cut-1"},
                    {"name": "broken", "upstream": "gpt-image-1+error-after-1"},
                ],
                "timeouts": {"connect": 2, "read": 5},
            },
            {
                "name": "images-backup",
                "base_url": base_url,
                "api_key": CHANNEL_KEY,
                "priority": 0,
                "models": [{"name": "shaky", "upstream": "gpt-image-1"}],
            },
            {
                "name": "azure-images",
                "type": "azure-openai",
                "base_url": endpoint,
                "api_key": CHANNEL_KEY,
                "azure": {"api_version": "2024-10-21"},
                "models": [{"name": "azure-image", "upstream": "gpt-image-1"}],
            },
        ]
        tokens = {"kind": "image", "prices": TOKEN_PRICES}
        config["models"] += [
            {"name": "gpt-image", **tokens},
            {"name": "dalle", "kind": "image", "prices": {"per_image": PER_IMAGE}},
            {"name": "dalle2", "kind": "image", "prices": {"per_image": {"*": "0.02"}}},
            *(
                {"name": name, **tokens}
                for name in (
                    *("shaky", "leaky", "html", "html-url", "silent", "boastful", "cut"),
                    "broken",
                )
            ),
            {"name": "azure-image", **tokens},
        ]

    return tweak


@pytest.fixture
async def images() -> AsyncIterator[FakeImages]:
    async with FakeImages(api_key=CHANNEL_KEY) as running:
        yield running


@pytest.fixture
async def gateway(start_gateway: StartGateway, images: FakeImages) -> Gateway:
    return await start_gateway(with_images(images.base_url, images.endpoint))


@pytest.fixture
async def key(gateway: Gateway) -> str:
    return await gateway.key(await gateway.group("team", rpm=100))


def token_cost(text: int, image: int, output: int) -> int:
    return TOKEN_PRICE.cost(
        prompt_tokens=text + image, image_tokens=image, completion_tokens=output
    )


async def test_the_sdk_generates_images_billed_by_the_tokens_reported(
    gateway: Gateway, key: str, images: FakeImages
) -> None:
    raw = await gateway.client(key).images.with_raw_response.generate(
        model="gpt-image", prompt="a red fox in snow", n=2, quality="low", size="1024x1024"
    )
    reply = raw.parse()
    assert len(reply.data or []) == 2
    for index, item in enumerate(reply.data or []):
        assert item.url is None
        assert base64.b64decode(item.b64_json or "") == png(f"a red fox in snow#{index}")
    assert (reply.size, reply.quality, reply.output_format) == ("1024x1024", "low", "png")
    usage = reply.usage
    assert usage is not None
    output = 2 * OUTPUT_TOKENS["low"]
    assert (usage.input_tokens, usage.output_tokens, usage.total_tokens) == (5, output, 5 + output)
    assert usage.input_tokens_details.text_tokens == 5
    sent = images.last_request
    assert (sent.path, sent.body["model"], sent.body["n"]) == (
        "/v1/images/generations",
        "gpt-image-1",
        2,
    )
    assert "response_format" not in sent.body  # GPT image models refuse it

    (record,) = await records(gateway)
    assert (record.endpoint, record.model, record.status) == (
        "/v1/images/generations",
        "gpt-image",
        200,
    )
    assert (record.prompt_tokens, record.completion_tokens) == (5, output)
    assert record.cost_nanos == token_cost(5, 0, output)
    assert not record.estimated
    assert raw.headers["x-request-id"] == record.request_id
    assert "x-ratelimit-remaining-requests" in raw.headers


async def fetch(gateway: Gateway, url: str, key: str | None) -> tuple[int, bytes, Any]:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with aiohttp.ClientSession() as session, session.get(url, headers=headers) as got:
        return got.status, await got.read(), got.headers


async def test_a_url_reply_is_parleys_own_private_to_the_group(
    gateway: Gateway, images: FakeImages
) -> None:
    owners = await gateway.group("owners")
    key, same_group = await gateway.key(owners), await gateway.key(owners)
    other_group = await gateway.key(await gateway.group("others"))
    reply = await gateway.client(key).images.generate(
        model="dalle", prompt="a lighthouse", response_format="url", quality="hd", size="1024x1024"
    )
    (item,) = reply.data or []
    assert item.b64_json is None and item.url is not None
    assert item.url.startswith(f"{gateway.v1}/images/files/img_")
    assert SIGNATURE not in item.url and images.endpoint not in item.url
    assert item.revised_prompt == "A detailed picture of a lighthouse"
    assert images.last_request.body["response_format"] == "b64_json"  # no upstream URL to fetch
    assert images.served_files == []

    status, data, headers = await fetch(gateway, item.url, same_group)
    assert (status, data) == (200, png("a lighthouse#0"))
    assert headers["Content-Type"] == "image/png"
    assert headers["Cache-Control"].startswith("private, max-age=")
    path = item.url.removeprefix(gateway.base_url)
    status, body = await call(gateway, "GET", path, other_group)
    assert status == 404 and body["error"]["code"] == "image_not_found"
    assert (await call(gateway, "GET", path, None))[0] == 401
    assert (await call(gateway, "GET", "/v1/images/files/img_..%2Fparley.db", key))[0] == 404

    (record,) = await records(gateway)
    assert record.cost_nanos == usd_to_nanos("0.08")  # one 1024x1024/hd image


async def test_an_expired_url_is_a_404(
    gateway: Gateway, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    reply = await gateway.client(key).images.generate(
        model="dalle", prompt="a clock", response_format="url"
    )
    url = (reply.data or [])[0].url or ""
    assert (await fetch(gateway, url, key))[0] == 200
    later = time.time() + gateway.settings.images.url_ttl_seconds + 1
    monkeypatch.setattr(image_files.time, "time", lambda: later)
    status, body = await call(gateway, "GET", url.removeprefix(gateway.base_url), key)
    assert status == 404 and body["error"]["code"] == "image_not_found"


async def test_an_upstream_url_is_fetched_without_credentials_and_never_handed_out(
    gateway: Gateway, key: str, images: FakeImages
) -> None:
    raw = await gateway.client(key).images.with_raw_response.generate(
        model="dalle2", prompt="a boat", n=2
    )
    reply = raw.parse()
    assert [base64.b64decode(item.b64_json or "") for item in reply.data or []] == [
        png("a boat#0"),
        png("a boat#1"),
    ]
    assert SIGNATURE not in raw.text
    assert "response_format" not in images.requests[0].body
    assert images.served_files == ["file-0", "file-1"]  # the fake refuses credentials
    (record,) = await records(gateway)
    assert record.cost_nanos == 2 * usd_to_nanos("0.02")
    assert (record.prompt_tokens, record.completion_tokens, record.estimated) == (0, 0, False)


async def test_edits_send_several_images_and_a_mask_billed_by_image_tokens(
    gateway: Gateway, key: str, images: FakeImages
) -> None:
    reply = await gateway.client(key).images.edit(
        model="gpt-image",
        image=[("one.png", png("one"), "image/png"), ("two.webp", WEBP, "image/webp")],
        mask=("mask.png", png("mask"), "image/png"),
        prompt="add a hat",
        quality="high",
        input_fidelity="high",
    )
    assert base64.b64decode((reply.data or [])[0].b64_json or "") == png("add a hat#0")
    (upload,) = images.uploads
    assert [(name, content_type) for name, _, content_type, _ in upload] == [
        ("image[]", "image/png"),
        ("image[]", "image/webp"),
        ("mask", "image/png"),
    ]
    assert [data for *_, data in upload] == [png("one"), WEBP, png("mask")]
    sent = images.last_request
    assert sent.path == "/v1/images/edits"
    assert (sent.body["model"], sent.body["input_fidelity"]) == ("gpt-image-1", "high")
    image_tokens = 3 * IMAGE_INPUT_TOKENS
    usage = reply.usage
    assert usage is not None and usage.input_tokens_details.image_tokens == image_tokens
    (record,) = await records(gateway)
    assert record.endpoint == "/v1/images/edits"
    assert record.cost_nanos == token_cost(3, image_tokens, OUTPUT_TOKENS["high"])


@pytest.mark.parametrize(
    ("files", "param"),
    [
        ({"image": ("a.gif", b"GIF89a\x01\0\x01\0", "image/gif")}, "image"),
        (
            {"image": ("a.png", png("a"), "image/png"), "mask": ("m.png", b"<svg/>", "image/png")},
            "mask",
        ),
    ],
)
async def test_an_upload_that_is_not_an_image_is_refused_naming_its_field(
    gateway: Gateway, key: str, images: FakeImages, files: dict[str, Any], param: str
) -> None:
    with pytest.raises(openai.BadRequestError) as refused:
        await gateway.client(key).images.edit(model="gpt-image", prompt="x", **files)
    assert refused.value.status_code == 400
    error = refused.value.body
    assert isinstance(error, dict)
    assert (error["param"], error["code"]) == (param, "invalid_image_format")
    assert images.requests == []
    assert await records(gateway) == []


async def test_an_upload_over_the_bound_is_a_413(
    start_gateway: StartGateway, images: FakeImages
) -> None:
    tweak = with_images(images.base_url, images.endpoint)

    def bounded(config: dict[str, Any]) -> None:
        tweak(config)
        config["images"] = {"max_file_bytes": 1000}

    gateway = await start_gateway(bounded)
    key = await gateway.key(await gateway.group("team"))
    big = png("big") + b"\0" * 2000
    with pytest.raises(openai.APIStatusError) as refused:
        await gateway.client(key).images.edit(model="gpt-image", prompt="x", image=("a.png", big))
    assert refused.value.status_code == 413
    assert images.requests == []


async def test_uploads_together_over_the_body_bound_are_a_413(
    start_gateway: StartGateway, images: FakeImages
) -> None:
    tweak = with_images(images.base_url, images.endpoint)

    def bounded(config: dict[str, Any]) -> None:
        tweak(config)
        config["server"]["max_body_bytes"] = 2000
        config["images"] = {"max_file_bytes": 1500}

    gateway = await start_gateway(bounded)
    key = await gateway.key(await gateway.group("team"))
    each = png("part") + b"\0" * 1200  # each under its bound, together over the body's
    pictures = [("a.png", each, "image/png"), ("b.png", each, "image/png")]
    with pytest.raises(openai.APIStatusError) as refused:
        await gateway.client(key).images.edit(model="gpt-image", prompt="x", image=pictures)
    assert refused.value.status_code == 413
    assert "set of images" in str(refused.value.body)
    assert images.requests == []


async def test_the_sdk_streams_partial_images_then_the_finished_one(
    gateway: Gateway, key: str, images: FakeImages
) -> None:
    stream = await gateway.client(key).images.generate(
        model="gpt-image", prompt="a quiet harbour", stream=True, partial_images=2, quality="medium"
    )
    events = [event async for event in stream]
    assert [event.type for event in events] == [
        "image_generation.partial_image",
        "image_generation.partial_image",
        "image_generation.completed",
    ]
    assert [getattr(event, "partial_image_index", None) for event in events[:2]] == [0, 1]
    assert base64.b64decode(events[1].b64_json) == png("partial-1")
    done = events[-1]
    assert base64.b64decode(done.b64_json) == png("a quiet harbour#0")
    assert done.usage.output_tokens == OUTPUT_TOKENS["medium"]
    assert images.last_request.body["stream"] is True
    assert images.last_request.body["partial_images"] == 2
    (record,) = await records(gateway)
    assert record.status == 200
    assert record.cost_nanos == token_cost(3, 0, OUTPUT_TOKENS["medium"])


async def test_a_streamed_edit_speaks_image_edit_events(gateway: Gateway, key: str) -> None:
    stream = await gateway.client(key).images.edit(
        model="gpt-image",
        prompt="paint it",
        image=("a.png", png("a")),
        stream=True,
        partial_images=1,
    )
    assert [event.type async for event in stream] == [
        "image_edit.partial_image",
        "image_edit.completed",
    ]


async def test_a_stream_that_fails_midway_says_so_and_bills_the_previews(
    gateway: Gateway, key: str
) -> None:
    stream = await gateway.client(key).images.generate(
        model="broken", prompt="x", stream=True, partial_images=2
    )
    seen = []
    with pytest.raises(openai.APIError):
        async for event in stream:
            seen.append(event.type)
    assert seen == ["image_generation.partial_image"]
    (record,) = await records(gateway)
    assert record.status == 502
    assert record.completion_tokens == 100  # one partial image, as OpenAI bills it


async def test_a_stream_cut_before_its_image_fails_and_bills_what_came(
    gateway: Gateway, key: str
) -> None:
    stream = await gateway.client(key).images.generate(
        model="cut", prompt="x", stream=True, partial_images=2
    )
    with pytest.raises(openai.APIError):
        _ = [event async for event in stream]
    (record,) = await records(gateway)
    assert record.status == 502


async def test_failover_reaches_the_next_channel_and_meters_once(
    gateway: Gateway, key: str, images: FakeImages
) -> None:
    reply = await gateway.client(key).images.generate(model="shaky", prompt="a bridge")
    assert reply.data
    assert [request.body["model"] for request in images.requests] == [
        "gpt-image-1+fail-500",
        "gpt-image-1",
    ]
    (record,) = await records(gateway)
    assert (record.channel, record.status) == ("images-backup", 200)


@pytest.mark.parametrize("model", ["html", "html-url"])
async def test_an_upstream_sending_something_else_than_an_image_is_a_502_billed_nothing(
    gateway: Gateway, key: str, model: str
) -> None:
    status, body = await call(
        gateway, "POST", "/v1/images/generations", key, json={"model": model, "prompt": "x"}
    )
    assert status == 502 and "not PNG, JPEG or WebP" in body["error"]["message"]
    assert SIGNATURE not in str(body)
    (record,) = await records(gateway)
    assert (record.status, record.cost_nanos) == (502, 0)


async def test_urls_name_the_public_address_when_one_is_set(
    start_gateway: StartGateway, images: FakeImages
) -> None:
    tweak = with_images(images.base_url, images.endpoint)

    def public(config: dict[str, Any]) -> None:
        tweak(config)
        config["images"] = {"public_url": "https://ai.example.com/"}

    gateway = await start_gateway(public)
    key = await gateway.key(await gateway.group("team"))
    reply = await gateway.client(key).images.generate(
        model="dalle", prompt="x", response_format="url"
    )
    url = (reply.data or [])[0].url or ""
    assert url.startswith("https://ai.example.com/v1/images/files/img_")
    local = url.replace("https://ai.example.com", gateway.base_url)
    assert (await fetch(gateway, local, key))[0] == 200


async def test_no_secret_reaches_the_caller(gateway: Gateway, key: str) -> None:
    status, body = await call(
        gateway, "POST", "/v1/images/generations", key, json={"model": "leaky", "prompt": "x"}
    )
    assert status == 400
    assert CHANNEL_KEY not in str(body) and key not in str(body)


async def test_a_missing_report_bills_parleys_estimate_and_an_inflated_one_is_capped(
    gateway: Gateway, key: str
) -> None:
    await gateway.client(key).images.generate(
        model="silent", prompt="one two", size="1024x1024", quality="high"
    )
    await gateway.client(key).images.generate(
        model="boastful", prompt="one two", size="1024x1024", quality="high"
    )
    boastful, silent = sorted(await records(gateway), key=lambda record: record.model)
    assert (boastful.model, silent.model) == ("boastful", "silent")
    assert silent.estimated and boastful.estimated
    # OpenAI's published count for one 1024x1024 high image, billed for both
    assert silent.completion_tokens == boastful.completion_tokens == 4162
    assert silent.cost_nanos == boastful.cost_nanos == token_cost(2, 0, 4162)


async def test_spent_images_use_up_the_budget(gateway: Gateway) -> None:
    key = await gateway.key(await gateway.group("thrifty", budget_nanos=usd_to_nanos("0.1")))
    reply = await gateway.client(key).images.generate(model="dalle", prompt="x", n=2, quality="hd")
    assert len(reply.data or []) == 2
    await gateway.flush_usage()
    with pytest.raises(openai.RateLimitError) as refused:
        await gateway.client(key).images.generate(model="dalle", prompt="x")
    assert refused.value.code == "insufficient_quota"


def test_admission_holds_n_images_at_the_dearest_grade_the_request_allows() -> None:
    table = tuple(
        (size, quality, usd_to_nanos(usd))
        for size, quality, usd in (
            ("1024x1024", "standard", "0.04"),
            ("1024x1024", "hd", "0.08"),
            ("1792x1024", "hd", "0.12"),
            ("*", "*", "0.02"),
        )
    )
    price = Price(per_image=table)
    allowance = Allowance(images=3, image_grade=Grade("auto", "hd"))
    assert worst_cost(price, allowance) == 3 * usd_to_nanos("0.12")
    tokens = Allowance(prompt_tokens=1000, completion_tokens=5000, images=1)
    assert worst_cost(TOKEN_PRICE, tokens) == TOKEN_PRICE.cost(
        prompt_tokens=1000, image_tokens=1000, completion_tokens=5000
    )


async def test_a_grade_the_model_does_not_price_is_refused(
    start_gateway: StartGateway, images: FakeImages
) -> None:
    tweak = with_images(images.base_url, images.endpoint)

    def narrow(config: dict[str, Any]) -> None:
        tweak(config)
        (dalle,) = [model for model in config["models"] if model["name"] == "dalle"]
        dalle["prices"] = {"per_image": {"1024x1024/standard": "0.04"}}

    gateway = await start_gateway(narrow)
    key = await gateway.key(await gateway.group("team"))
    status, body = await call(
        gateway,
        "POST",
        "/v1/images/generations",
        key,
        json={"model": "dalle", "prompt": "x", "quality": "hd"},
    )
    assert status == 400 and body["error"]["code"] == "image_grade_not_priced"
    assert images.requests == []


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"prompt": "x", "n": 11}, "n"),
        ({"prompt": "x", "size": "huge"}, "size"),
        ({"prompt": "x", "quality": "ultra"}, "quality"),
        ({"prompt": "x", "response_format": "png"}, "response_format"),
        ({"prompt": "x", "frame_count": 4}, "frame_count"),
        ({"prompt": ""}, "prompt"),
        ({"prompt": "x", "partial_images": 2}, "partial_images"),
    ],
)
async def test_bad_fields_are_400s_naming_them(
    gateway: Gateway, key: str, body: dict[str, Any], param: str
) -> None:
    status, reply = await call(
        gateway, "POST", "/v1/images/generations", key, json={"model": "gpt-image", **body}
    )
    assert status == 400 and reply["error"]["param"] == param


async def test_group_access_and_kinds_hold(gateway: Gateway) -> None:
    key = await gateway.key(await gateway.group("chatters", models=["chat-large"]))
    status, body = await call(
        gateway, "POST", "/v1/images/generations", key, json={"model": "gpt-image", "prompt": "x"}
    )
    assert status == 404 and body["error"]["code"] == "model_not_found"
    status, body = await call(
        gateway, "POST", "/v1/images/generations", key, json={"model": "chat-large", "prompt": "x"}
    )
    assert status == 400 and body["error"]["code"] == "model_not_supported"


async def test_models_and_capabilities_list_image_models(gateway: Gateway, key: str) -> None:
    status, body = await call(gateway, "GET", "/v1/models/dalle", key)
    assert status == 200
    assert body["kind"] == "image"
    assert body["endpoints"] == ["/v1/images/generations", "/v1/images/edits"]
    assert body["pricing"]["per_image"]["1024x1024/hd"] == pytest.approx(0.08)
    listed = await gateway.client(key).models.list()
    assert "gpt-image" in {model.id for model in listed.data}


async def test_an_azure_channel_serves_images_at_its_deployment(
    gateway: Gateway, key: str, images: FakeImages
) -> None:
    reply = await gateway.client(key).images.generate(model="azure-image", prompt="a kite")
    assert reply.data
    sent = images.last_request
    assert sent.path == "/openai/deployments/gpt-image-1/images/generations"
    assert sent.headers["api-key"] == CHANNEL_KEY
    await gateway.client(key).images.edit(
        model="azure-image", prompt="a kite", image=("k.png", png("k"))
    )
    assert images.last_request.path == "/openai/deployments/gpt-image-1/images/edits"


async def test_the_request_log_holds_image_calls_and_refusals_without_the_prompt(
    start_gateway: StartGateway, images: FakeImages
) -> None:
    tweak = with_images(images.base_url, images.endpoint)

    def with_admin(config: dict[str, Any]) -> None:
        tweak(config)
        config["admin"] = {"token": ADMIN}

    gateway = await start_gateway(with_admin)
    key = await gateway.key(await gateway.group("team"))
    secret_prompt = "a-prompt-no-log-may-hold-91c2"
    for model in ("gpt-image", "no-such-model"):
        body = {"model": model, "prompt": secret_prompt}
        await call(gateway, "POST", "/v1/images/generations", key, json=body)
    await gateway.flush_usage()
    status, page = await admin_call(gateway, "GET", "/admin/requests")
    assert status == 200
    lines = {line["model_requested"]: line for line in page["data"]}
    made, refused = lines["gpt-image"], lines["no-such-model"]
    assert (made["endpoint"], made["status"], made["admitted"]) == (
        "/v1/images/generations",
        200,
        True,
    )
    assert made["cost_usd"] > 0
    assert (refused["status"], refused["admitted"], refused["error_code"]) == (
        404,
        False,
        "model_not_found",
    )
    assert secret_prompt not in str(page)


async def test_an_image_sent_as_a_url_is_refused_naming_it(gateway: Gateway, key: str) -> None:
    form = aiohttp.FormData(
        {"model": "gpt-image", "prompt": "x", "image": "https://example.com/a.png"},
        default_to_multipart=True,
    )
    status, body = await call(gateway, "POST", "/v1/images/edits", key, data=form)
    assert status == 400 and body["error"]["param"] == "image"
    assert body["error"]["code"] == "invalid_image_format"  # its bytes are read, not fetched
