"""Consecutive messages of one role become one turn in work that grows with the blocks.

A body of many same-role items (a Responses ``input``, chat ``messages`` bound for
Anthropic, Gemini or Bedrock, which alternate turns) is merged into one turn. Each
message's blocks are counted as they are read (iterated, indexed or concatenated):
merging n messages reads each block a fixed number of times, never once per later
message, whatever n is.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, SupportsIndex

import pytest

from parley.dialects import (
    anthropic_messages,
    bedrock_converse,
    canonical,
    gemini,
    openai_chat,
    openai_responses,
)
from parley.dialects.canonical import Block, Message, Text, merged

COUNT = 3_000
"""Same-role messages per body: enough that reading every earlier block again at each
message (about COUNT**2 / 2 reads) is far above the bound of a few reads a block."""
READS_PER_BLOCK = 5


class Reads:
    """Block reads, counted by ``CountedBlocks``."""

    def __init__(self) -> None:
        self.count = 0


def counted_blocks(reads: Reads) -> type[tuple[Block, ...]]:
    class CountedBlocks(tuple[Block, ...]):
        """A message's blocks that count each block read out of them."""

        def __iter__(self) -> Iterator[Block]:
            reads.count += len(self)
            return super().__iter__()

        def __getitem__(self, index: Any) -> Any:
            found = super().__getitem__(index)
            reads.count += len(found) if isinstance(index, slice) else 1
            return found

        def __add__(self, other: tuple[Any, ...]) -> CountedBlocks:  # type: ignore[override]
            reads.count += len(self) + len(other)
            return CountedBlocks(tuple.__add__(self, other))

        def __mul__(self, times: SupportsIndex) -> CountedBlocks:
            raise AssertionError("not expected")

    return CountedBlocks


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> Reads:
    """Every ``Message`` the codecs and the merge make holds counted blocks."""
    counter = Reads()
    blocks_type = counted_blocks(counter)

    class CountedMessage(Message):
        __slots__ = ()

        def __init__(self, role: Any, blocks: tuple[Block, ...]) -> None:
            super().__init__(role, blocks_type(blocks))

    for module in (canonical, openai_chat, openai_responses):
        monkeypatch.setattr(module, "Message", CountedMessage)
    return counter


def chat_body(count: int) -> dict[str, Any]:
    messages = [{"role": "user", "content": f"line {n}"} for n in range(count)]
    return {"model": "m", "messages": messages}


def responses_request(count: int) -> canonical.Request:
    body = {"model": "m", "input": [{"role": "user", "content": f"line {n}"} for n in range(count)]}
    return openai_responses.decode_request(body, openai_responses.normalized_input(body["input"]))


ROUTES: dict[str, Callable[[int], object]] = {
    "responses to canonical": responses_request,
    "chat to canonical": lambda count: openai_chat.decode_request(chat_body(count)),
    "chat to anthropic": lambda count: anthropic_messages.encode_request(
        openai_chat.decode_request(chat_body(count)), "m", 16
    ),
    "chat to gemini": lambda count: gemini.encode_request(
        openai_chat.decode_request(chat_body(count))
    ),
    "chat to converse": lambda count: bedrock_converse.encode_request(
        openai_chat.decode_request(chat_body(count))
    ),
}


@pytest.mark.parametrize("route", list(ROUTES))
def test_a_run_of_one_role_reads_each_block_a_few_times(route: str, reads: Reads) -> None:
    ROUTES[route](COUNT)
    assert reads.count <= READS_PER_BLOCK * COUNT


def test_a_run_of_one_role_is_one_turn_in_order() -> None:
    request = responses_request(5)
    assert [message.role for message in request.messages] == ["user"]
    assert request.messages[0].blocks == tuple(Text(f"line {n}") for n in range(5))


def test_turns_alternate_and_a_lone_message_is_kept_as_it_is() -> None:
    first, second, third = (
        Message("user", (Text("a"),)),
        Message("user", (Text("b"), Text("c"))),
        Message("assistant", (Text("d"),)),
    )
    turns = merged([first, second, third, Message("user", (Text("e"),))])
    assert [turn.role for turn in turns] == ["user", "assistant", "user"]
    assert turns[0].blocks == (Text("a"), Text("b"), Text("c"))
    assert turns[1] is third
    assert merged([]) == []
