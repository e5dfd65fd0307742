"""What can go wrong talking to an upstream, in terms the adapters map to the error tree.

The messages name no address and no credential: they may end up in a caller's error.
"""

from __future__ import annotations


class HttpError(Exception):
    """Any failure of an upstream exchange."""


class ConnectFailed(HttpError):
    """The upstream could not be reached (refused, unresolvable, TLS failed)."""


class ConnectTimeout(HttpError, TimeoutError):
    """The connection (with its TLS handshake) took longer than the connect timeout."""


class ReadTimeout(HttpError, TimeoutError):
    """The upstream sent nothing for longer than the read timeout."""


class Disconnected(HttpError):
    """The connection ended before the reply did."""


class BrokenReply(HttpError):
    """The reply is not valid HTTP, or its body cannot be decoded."""


class HeadTooLarge(BrokenReply):
    """The reply's head holds more bytes or fields than the client's bound (``HeadLimits``)."""


class PoolTimeout(ConnectTimeout):
    """Every connection the client may open to the origin stayed busy for the connect timeout."""


class ReplyTooLarge(HttpError):
    """The reply's body is larger than the caller's bound; reading stopped at the bound."""
