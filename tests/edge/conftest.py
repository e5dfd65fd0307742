"""The edge tests run against the same in-process gateway as ``tests/api`` (the real app
behind ``EdgeRunner``, over a real port, in front of the fake engine), and ``parley serve``
as a subprocess through ``tests/process``'s registry (``procs``)."""

from tests.api.conftest import engine, gateway, key, start_gateway
from tests.process.conftest import procs

__all__ = ["engine", "gateway", "key", "procs", "start_gateway"]
