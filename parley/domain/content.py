"""Content logging: what a group lets Parley keep of its calls' prompts and replies.

A group chooses one policy (``ContentLogging``):

* ``off``: nothing is kept, as for a group that never chose (the default);
* ``metadata``: sizes and counts only (bytes, messages, the model, the finish reason),
  never a word of the prompt or the reply;
* ``redacted``: the prompt and the reply, with emails, phone numbers, card numbers,
  keys, tokens and other secret shapes masked before they are stored;
* ``full``: the prompt and the reply as they were.

Each kept call's content is kept ``retention_days`` days, then purged. Content (the
``redacted`` and ``full`` policies) is stored sealed with the channel-credential keys
(``parley/credentials.py``); a row of ``metadata`` holds no content and is stored plain.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal, get_args

ContentPolicy = Literal["off", "metadata", "redacted", "full"]
CONTENT_POLICIES: tuple[ContentPolicy, ...] = get_args(ContentPolicy)
DEFAULT_RETENTION_DAYS = 30
MAX_RETENTION_DAYS = 3_650
"""Ten years: a retention longer than that is a mistake, not a policy."""


@dataclass(frozen=True, slots=True)
class ContentLogging:
    """A group's content policy and how long what it keeps is kept."""

    policy: ContentPolicy = "off"
    retention_days: int = DEFAULT_RETENTION_DAYS

    @property
    def on(self) -> bool:
        """Anything of a call is kept (metadata at least)."""
        return self.policy != "off"

    @property
    def keeps_text(self) -> bool:
        """The prompt and the reply themselves are kept (and may go into traces)."""
        return self.policy in {"redacted", "full"}


NO_CONTENT_LOGGING = ContentLogging()


def content_policy(value: str) -> ContentPolicy:
    """``value`` as a policy; ``ValueError`` when it names none."""
    for policy in CONTENT_POLICIES:
        if value == policy:
            return policy
    raise ValueError(value)


@dataclass(frozen=True, slots=True)
class StoredContent:
    """One call's kept content, as the store holds it."""

    request_id: str
    group_id: int
    policy: str
    """The group's policy when the call was made: ``metadata``, ``redacted`` or ``full``."""
    sealed: bool
    """``body`` is a sealed token (``redacted``, ``full``), else plain JSON (``metadata``)."""
    body: str
    """JSON (``CallContent.document``), sealed when ``sealed``."""
    created_at: datetime
    expires_at: datetime
