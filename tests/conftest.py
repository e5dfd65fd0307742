"""Suite-wide rules.

With ``PARLEY_REQUIRE_SERVICES=1`` (set by ``.ci/run``) a test that would skip because
PostgreSQL, Redis or ``redis-server`` is missing fails instead: CI must never pass
with the scale-out path untested. Administrators' passwords are hashed cheaply in the
tests' own process (``cheap_password_hashes``). Bytecode is cached even where
``PYTHONDONTWRITEBYTECODE`` is set (``pytest_configure``).
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Generator
from pathlib import Path

import pytest

from parley.admin import passwords

PYCACHE = Path(tempfile.gettempdir()) / "parley-tests-pycache"
"""Where the suite caches bytecode when the environment forbids writing it beside the
sources (outside the checkout, so the tree stays as the environment wants it)."""


def pytest_configure(config: pytest.Config) -> None:
    """Cache bytecode, under ``PYCACHE``, when ``PYTHONDONTWRITEBYTECODE`` is set.

    Without a cache every import compiles from source: each run rewrites the asserts of
    all 276 test modules again, and each of the hundreds of ``python -m parley`` and
    ``python -m bench`` processes the tests start compiles Parley again (about a second
    of CPU each). The test workers and those processes inherit the environment set here.
    """
    if not (sys.dont_write_bytecode or os.environ.get("PYTHONDONTWRITEBYTECODE")):
        return
    prefix = os.environ.get("PYTHONPYCACHEPREFIX") or str(PYCACHE)
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ["PYTHONPYCACHEPREFIX"] = prefix
    sys.dont_write_bytecode = False
    sys.pycache_prefix = prefix


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.skipped and os.environ.get("PARLEY_REQUIRE_SERVICES") == "1":
        report.outcome = "failed"
        report.longrepr = f"skipped, but PARLEY_REQUIRE_SERVICES=1 forbids skips: {report.longrepr}"
    return report


@pytest.fixture(autouse=True)
def cheap_password_hashes(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Administrators' passwords hashed at scrypt's lowest accepted cost (N=2^10), not
    production's (N=2^17: 128 MiB and a good part of a second of CPU a hash), which would
    make the dashboard's tests minutes long. The cost changes nothing the tests check
    but the stored parameters, which tests marked ``owasp_scrypt`` check at the real cost.
    """
    if request.node.get_closest_marker("owasp_scrypt") is None:
        monkeypatch.setattr(passwords, "LOG2_N", 10)
