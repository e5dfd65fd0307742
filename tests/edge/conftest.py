"""The edge tests run against the same in-process gateway as ``tests/api`` (the real app
behind ``EdgeRunner``, over a real port, in front of the fake engine)."""

from tests.api.conftest import engine, gateway, key, start_gateway

__all__ = ["engine", "gateway", "key", "start_gateway"]
