"""``parley serve --allocator malloc`` runs its serving process on glibc's malloc
(``PYTHONMALLOC=malloc``, set by executing itself once more, in the same process); by
default, or when the operator's ``PYTHONMALLOC`` says otherwise, it does not
(parley/heap.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from parley.heap import serve_allocator
from tests.process.calls import gateway_config
from tests.process.procs import Processes

ARGV = ["/usr/bin/parley", "serve", "--port", "8080"]


def _allocator_of(pid: int) -> str | None:
    """``PYTHONMALLOC`` in a running process's environment (Linux)."""
    environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    values = [v.partition(b"=")[2].decode() for v in environ if v.startswith(b"PYTHONMALLOC=")]
    return values[0] if values else None


def test_serve_runs_on_malloc_when_asked(procs: Processes, tmp_path: Path) -> None:
    if not Path("/proc/self/environ").exists():
        pytest.skip("reads /proc (Linux)")
    engine_url = procs.engine()
    default = procs.serve(gateway_config(engine_url, tmp_path))
    malloc = procs.serve(
        gateway_config(engine_url, tmp_path), args=("--allocator", "malloc"), name="malloc"
    )
    assert _allocator_of(default.pid) is None
    assert _allocator_of(malloc.pid) == "malloc"  # the same process, executed once more


def test_malloc_is_chosen_by_executing_serve_again_with_the_same_arguments() -> None:
    executable, argv, environ = serve_allocator("malloc", {"HOME": "/root"}, ARGV) or ("", [], {})
    assert executable == sys.executable
    assert argv == [sys.executable, *ARGV[1:]]
    assert environ == {"HOME": "/root", "PYTHONMALLOC": "malloc"}


@pytest.mark.parametrize(
    ("wanted", "environ"),
    [
        ("pymalloc", {}),
        ("malloc", {"PYTHONMALLOC": "pymalloc"}),  # the operator's choice
        ("malloc", {"PYTHONMALLOC": "malloc"}),  # already executed again: once only
    ],
)
def test_no_second_execution_when_not_needed(wanted: str, environ: dict[str, str]) -> None:
    assert serve_allocator(wanted, environ, ARGV) is None  # type: ignore[arg-type]
