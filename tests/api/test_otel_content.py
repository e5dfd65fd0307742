"""Prompt and reply content in OpenTelemetry spans only where the group's content
policy keeps text: a ``full`` group's call span carries the prompt and the reply as the
content log keeps them, a ``redacted`` group's the masked text, and a ``metadata`` or
``off`` group's (and every upstream attempt's span) none of it, on one gateway at once."""

from __future__ import annotations

from typing import Any

from cryptography.fernet import Fernet

from parley.domain.content import ContentLogging, ContentPolicy
from tests.api.harness import Config, Gateway, StartGateway, call
from tests.api.test_otel import (  # noqa: F401
    collector,
    flush,
    no_content,
    sick,
    start,
    traced,
)
from tests.upstreams.otlp_collector import OtlpCollector

EMAIL = "grace.hopper@example.org"
PROMPT = f"the secret word is marmalade, mail {EMAIL}"
CONTENT_KEYS = ("parley.content.request", "parley.content.reply", "parley.content.policy")


async def group_key(gateway: Gateway, policy: ContentPolicy) -> str:
    group = await gateway.services.store.create_group(policy, content=ContentLogging(policy))
    gateway.services.directory.remember_group(group)
    return await gateway.key(group)


async def test_spans_carry_content_only_where_the_groups_policy_keeps_text(
    collector: OtlpCollector,  # noqa: F811
    start: StartGateway,  # noqa: F811
) -> None:
    def tweak(config: Config) -> None:
        traced(collector.endpoint)(config)
        config["admin"] = {"secret_keys": [Fernet.generate_key().decode()]}
        config["content"] = {"flush_seconds": 0.02}

    gateway = await start(tweak)
    policies: tuple[ContentPolicy, ...] = ("full", "redacted", "metadata", "off")
    for policy in policies:
        key = await group_key(gateway, policy)
        body: Any = {"model": "chat-large", "messages": [{"role": "user", "content": PROMPT}]}
        status, _ = await call(gateway, "POST", "/v1/chat/completions", key, json=body)
        assert status == 200
    await gateway.flush_usage()
    await gateway.services.contents.flush()  # the text is ready: the spans end
    await flush(gateway)

    roots = {span.attributes["parley.group"]: span for span in collector.named("chat chat-large")}
    assert set(roots) == set(policies)
    full = roots["full"].attributes
    assert full["parley.content.policy"] == "full"
    assert PROMPT in full["parley.content.request"] and EMAIL in full["parley.content.reply"]
    redacted = roots["redacted"].attributes
    assert "marmalade" in redacted["parley.content.request"]
    assert EMAIL not in redacted["parley.content.request"] + redacted["parley.content.reply"]
    assert "[email]" in redacted["parley.content.reply"]
    for policy in ("metadata", "off"):
        assert not set(CONTENT_KEYS) & set(roots[policy].attributes)
        no_content([roots[policy]])
    no_content(collector.named("chat upstream-chat"))  # attempts never carry content
    assert roots["full"].attributes["http.response.status_code"] == 200
