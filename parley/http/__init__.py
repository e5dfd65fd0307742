"""Parley's HTTP/1.1 client for upstream calls (see ``client`` for why it exists)."""

from parley.http.client import HttpClient, Prepared, Reply, prepare
from parley.http.errors import (
    BrokenReply,
    ConnectFailed,
    ConnectTimeout,
    Disconnected,
    HeadTooLarge,
    HttpError,
    PoolTimeout,
    ReadTimeout,
    ReplyTooLarge,
)
from parley.http.parsing import HeadLimits

__all__ = [
    "BrokenReply",
    "ConnectFailed",
    "ConnectTimeout",
    "Disconnected",
    "HeadLimits",
    "HeadTooLarge",
    "HttpClient",
    "HttpError",
    "PoolTimeout",
    "Prepared",
    "ReadTimeout",
    "Reply",
    "ReplyTooLarge",
    "prepare",
]
