"""Fake upstream engines: real HTTP servers on loopback, which tests point channels at."""

CONNECT_SECONDS = 5.0
"""The connect timeout of a target pointed at a fake engine, where no test is about it:
the engine shares the test's event loop, which on a loaded machine may take over a
second to accept (a refused connection still fails at once)."""
