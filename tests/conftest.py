"""Suite-wide rules.

With ``PARLEY_REQUIRE_SERVICES=1`` (set by ``.ci/run``) a test that would skip because
PostgreSQL, Redis or ``redis-server`` is missing fails instead: CI must never pass
with the scale-out path untested.
"""

from __future__ import annotations

import os
from collections.abc import Generator

import pytest


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.skipped and os.environ.get("PARLEY_REQUIRE_SERVICES") == "1":
        report.outcome = "failed"
        report.longrepr = f"skipped, but PARLEY_REQUIRE_SERVICES=1 forbids skips: {report.longrepr}"
    return report
