"""Classic completions on an Anthropic channel: the prompt as one user turn.

Messages has no raw-prompt mode, so a ``/v1/completions`` call is sent as a chat call
whose one user message is the prompt (a string, or an array of exactly one string);
token-id prompts, several prompts and the completion-only fields (``echo``,
``suffix``, ``best_of``, ``logprobs``) are a 400 naming the field. The reply's text is
the choice's ``text``; a stream's chat chunks become ``text_completion`` chunks.
"""

from __future__ import annotations

from typing import Any

from parley.dialects import openai_chat, openai_chat_reply
from parley.dialects.call import OPENAI_CHAT, ChatCall
from parley.dialects.canonical import Reply
from parley.dialects.translator import Failure, Translator
from parley.domain.usage import Usage
from parley.domain.wire import JSON
from parley.errors import InvalidRequest

COMPLETION_ONLY = {"echo": False, "suffix": None, "best_of": 1, "logprobs": None}
PASSED = ("model", "max_tokens", "temperature", "top_p", "stop", "user", "n", "seed")
PASSED_TOO = ("stream", "stream_options", "presence_penalty", "frequency_penalty")


def as_chat(body: JSON) -> JSON:
    """A completion body as the chat body it means."""
    for name, neutral in COMPLETION_ONLY.items():
        if body.get(name, neutral) not in (neutral, None):
            raise InvalidRequest(
                f"The field '{name}' cannot be sent to this model's upstream.", param=name
            )
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1:
        prompt = prompt[0]
    if not isinstance(prompt, str):
        raise InvalidRequest(
            "This model's upstream takes one text prompt: a string, or an array of one string.",
            param="prompt",
        )
    chat: JSON = {"messages": [{"role": "user", "content": prompt}]}
    for name, value in body.items():
        if name in PASSED or name in PASSED_TOO:
            chat[name] = value
        elif name not in COMPLETION_ONLY and name != "prompt":
            chat[name] = value  # judged by the chat translation, which names what it refuses
    return chat


def completion_call(body: JSON) -> ChatCall:
    """A completion body as the chat call it means (``as_chat``), for ``Chat.generate``."""
    return ChatCall(OPENAI_CHAT, as_chat(body), openai_chat.decode_request)


def completed(reply: Reply) -> JSON:
    """A canonical reply as the ``text_completion`` it answers."""
    return as_completion(openai_chat_reply.encode_reply(reply))


def as_completion(reply: JSON) -> JSON:
    """A ``chat.completion`` as the ``text_completion`` it answers."""
    choices = []
    for choice in reply.get("choices") or ():
        message = choice.get("message") or {}
        choices.append(
            {
                "text": message.get("content") or "",
                "index": choice.get("index", 0),
                "logprobs": None,
                "finish_reason": choice.get("finish_reason"),
            }
        )
    written = {**reply, "object": "text_completion", "choices": choices}
    return written


class CompletionChunks:
    """``Translator[JSON]``: a chat-chunk reader's chunks (``MessagesToChat``'s,
    ``ConverseToChat``'s, ``GeminiToChat``'s) as ``text_completion`` chunks."""

    __slots__ = ("_chat",)

    def __init__(self, chat: Translator[JSON]) -> None:
        self._chat = chat

    @property
    def failure(self) -> Failure | None:
        return self._chat.failure

    @property
    def done(self) -> bool:
        return self._chat.done

    def feed(self, data: bytes) -> list[JSON]:
        return [chunk for chunk in map(_completion_chunk, self._chat.feed(data)) if chunk]

    def end(self) -> list[JSON]:
        return [chunk for chunk in map(_completion_chunk, self._chat.end()) if chunk]

    def delivered(self) -> Usage | None:
        return self._chat.delivered()


def _completion_chunk(chunk: JSON) -> JSON | None:
    """The chunk as a completion's; ``None`` for one with nothing a completion says (the
    role, a tool call)."""
    choices: list[Any] = chunk["choices"]
    written = {**chunk, "object": "text_completion"}
    if not choices:
        return written  # the usage chunk
    choice = choices[0]
    text = choice["delta"].get("content")
    if text is None and choice["finish_reason"] is None:
        return None
    written["choices"] = [
        {"text": text or "", "index": 0, "logprobs": None, "finish_reason": choice["finish_reason"]}
    ]
    return written
