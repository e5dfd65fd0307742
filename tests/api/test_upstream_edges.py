"""What an upstream may do to a call, seen from the caller: never sent twice, no key
relayed, the upstream's own error codes relayed, oversized replies and events refused."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import openai
import orjson
import pytest

from tests.api.harness import CHANNEL_KEY, Gateway, records
from tests.api.test_upstream_and_metering import MESSAGES
from tests.http.rawserver import RawServer, keep_alive_reply
from tests.upstreams.completion_script import script_for, whole_reply
from tests.upstreams.openai_compatible import Behaviour, FakeEngine

BOUNDED = {"max_reply_bytes": 256 * 1024, "max_event_bytes": 64 * 1024}


def bounded(config: dict[str, Any]) -> None:
    config["upstream"] = BOUNDED


async def post(gateway: Gateway, key: str, body: dict[str, Any]) -> tuple[int, Any, bytes]:
    async with (
        aiohttp.ClientSession(headers={"Authorization": f"Bearer {key}"}) as session,
        session.post(f"{gateway.v1}/chat/completions", json=body) as response,
    ):
        return response.status, response.headers, await response.read()


# A paid request is never sent twice


async def test_a_request_the_upstream_read_then_dropped_is_not_sent_again(
    start_gateway: Any,
) -> None:
    reply = whole_reply(script_for("chat", {"model": "m", "messages": MESSAGES}, None, "x"))

    async def upstream(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await server.read_request(reader)
        writer.write(keep_alive_reply(orjson.dumps(reply), b"Content-Type: application/json\r\n"))
        await server.read_request(reader)  # the second call: read whole, then dropped

    async with RawServer(upstream) as server:

        def to_raw_server(config: dict[str, Any]) -> None:
            config["channels"][0]["base_url"] = f"http://127.0.0.1:{server.port}/v1"

        gateway = await start_gateway(to_raw_server)
        key = await gateway.key(await gateway.group("team"))
        assert (await post(gateway, key, {"model": "chat-large", "messages": MESSAGES}))[0] == 200
        status, _, body = await post(gateway, key, {"model": "chat-large", "messages": MESSAGES})
    assert len(server.requests) == 2, "the second request reached the upstream exactly once"
    assert server.connections == 1
    assert status == 502
    error = orjson.loads(body)["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert (error["type"], error["code"]) == ("upstream_error", "bad_gateway")
    assert "127.0.0.1" not in error["message"]
    assert sorted(record.status for record in await records(gateway)) == [200, 502]


# Relayed refusals: the upstream's codes, never the channel's key


@pytest.mark.parametrize("stream", [False, True])
async def test_the_upstreams_own_type_code_and_param_are_relayed_and_marked(
    gateway: Gateway, key: str, engine: FakeEngine, stream: bool
) -> None:
    engine.behaviour = Behaviour(overflow=True)
    with pytest.raises(openai.BadRequestError) as failed:
        await gateway.client(key).chat.completions.create(
            model="chat-large", messages=MESSAGES, stream=stream
        )
    error = failed.value
    assert error.code == "context_length_exceeded"  # what LangChain looks for
    assert (error.type, error.param) == ("invalid_request_error", "messages")
    assert "maximum context length is 4096 tokens" in error.message
    assert error.response.headers["x-parley-upstream-error"] == "relayed"


async def test_parleys_own_refusals_are_not_marked_as_relayed(gateway: Gateway, key: str) -> None:
    status, headers, _ = await post(gateway, key, {"model": "chat-large", "messages": []})
    assert status == 400
    assert "x-parley-upstream-error" not in headers


@pytest.mark.parametrize("status", [400, 413, 422])
async def test_a_refusal_quoting_the_channel_key_reaches_the_caller_redacted(
    gateway: Gateway, key: str, engine: FakeEngine, status: int
) -> None:
    engine.behaviour = Behaviour(fail=status, leak=True)
    code, headers, body = await post(gateway, key, {"model": "chat-large", "messages": MESSAGES})
    assert engine.last_request.authorization == f"Bearer {CHANNEL_KEY}"  # it was there to leak
    assert code == status
    assert headers["x-parley-upstream-error"] == "relayed"
    assert CHANNEL_KEY not in body.decode()
    assert "channel-secret" not in body.decode()
    error = orjson.loads(body)["error"]
    assert error["message"].startswith(f"Fake engine failure (status {status}).")
    assert "[redacted]" in error["message"]
    assert error["param"] is None, "a param holding the key is not relayed"


async def test_a_mid_stream_refusal_quoting_the_channel_key_is_redacted(
    gateway: Gateway, key: str, engine: FakeEngine
) -> None:
    engine.behaviour = Behaviour(error_after=3, leak=True)
    body = {"model": "chat-large", "messages": MESSAGES, "stream": True}
    status, _, raw = await post(gateway, key, body)
    assert status == 200
    assert CHANNEL_KEY not in raw.decode()
    events = [line[6:] for line in raw.split(b"\n") if line.startswith(b"data: ")]
    assert events[-1] == b"[DONE]"
    error = orjson.loads(events[-2])["error"]
    assert error["message"].startswith("The engine failed.")
    assert "[redacted]" in error["message"]
    assert (error["type"], error["param"]) == ("invalid_request_error", None)


# Bounds on what an upstream sends back


async def test_a_whole_reply_over_the_bound_is_a_502_billed_nothing(
    start_gateway: Any, engine: FakeEngine
) -> None:
    gateway = await start_gateway(bounded)
    key = await gateway.key(await gateway.group("team"))
    engine.behaviour = Behaviour(huge_reply=8 * 1024 * 1024)
    status, _, body = await post(gateway, key, {"model": "chat-large", "messages": MESSAGES})
    assert status == 502
    error = orjson.loads(body)["error"]
    assert error["code"] == "bad_gateway"
    assert "larger than Parley accepts" in error["message"]
    (record,) = await records(gateway)
    assert (record.status, record.cost_nanos, record.completion_tokens) == (502, 0, 0)
    engine.behaviour = Behaviour()
    assert (await post(gateway, key, {"model": "chat-large", "messages": MESSAGES}))[0] == 200


async def test_a_streamed_event_over_the_bound_ends_the_stream_billed_for_what_came(
    start_gateway: Any, engine: FakeEngine
) -> None:
    gateway = await start_gateway(bounded)
    key = await gateway.key(await gateway.group("team"))
    engine.behaviour = Behaviour(huge_event=64 * 1024 * 1024)
    body = {"model": "chat-large", "messages": MESSAGES, "stream": True}
    status, _, raw = await post(gateway, key, body)
    assert status == 200
    events = [line[6:] for line in raw.split(b"\n") if line.startswith(b"data: ")]
    assert events[-1] == b"[DONE]"
    error = orjson.loads(events[-2])["error"]
    assert (error["type"], error["code"]) == ("upstream_error", "bad_gateway")
    assert "streamed event larger than Parley accepts" in error["message"]
    delivered = [orjson.loads(event) for event in events[:-2]]
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in delivered) == "echo: hello"
    async with asyncio.timeout(5):
        await engine.wait_for_cancelled_streams(1)  # Parley stopped reading and hung up
    (record,) = await records(gateway)
    assert record.status == 502
    assert record.completion_tokens > 0 and record.cost_nanos > 0


async def test_a_call_finding_no_free_connection_in_time_is_a_502_and_falls_over(
    start_gateway: Any, engine: FakeEngine
) -> None:
    async with FakeEngine(api_key=CHANNEL_KEY) as spare:

        def one_connection_then_a_spare(config: dict[str, Any]) -> None:
            config["upstream"] = {"max_connections_per_origin": 1}
            busy = config["channels"][0]
            busy["priority"] = 10
            busy["timeouts"] = {"connect": 0.2, "read": 5}
            # the spare's own connect is not what is timed: a generous bound, so a loaded
            # machine cannot make it the call that fails
            spare_channel = {**busy, "name": "spare", "base_url": spare.base_url}
            spare_channel.update(priority=0, timeouts={"connect": 10, "read": 10})
            config["channels"].append(spare_channel)

        gateway = await start_gateway(one_connection_then_a_spare)
        key = await gateway.key(await gateway.group("team"))
        engine.behaviour = Behaviour(hang=1.0)
        body = {"model": "chat-large", "messages": MESSAGES}
        slow = asyncio.create_task(post(gateway, key, body))
        while not engine.requests:  # noqa: ASYNC110
            await asyncio.sleep(0.01)
        status, _, _ = await post(gateway, key, body)  # the one connection is busy
        assert status == 200
        assert len(spare.requests) == 1, "the call fell over to the spare channel"
        assert (await slow)[0] == 200
    channels = sorted(record.channel for record in await records(gateway))
    assert channels == ["engine", "spare"]
