"""``parley serve --allocator malloc|jemalloc|mimalloc`` runs its serving processes on that
allocator (``PYTHONMALLOC=malloc``, and for jemalloc and mimalloc their library in
``LD_PRELOAD``, set by executing itself once more, in the same process); by default
(``auto``) on jemalloc where its library is installed, else on pymalloc; with
``--allocator pymalloc``, or when the operator's ``PYTHONMALLOC`` says otherwise, it does
not execute itself again (parley/heap.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from parley import heap
from parley.cli import cli
from parley.heap import (
    AllocatorMissing,
    Library,
    allocator_environment,
    library_path,
    resolved,
    running_allocator,
    serve_allocator,
)
from tests.process.calls import Chat, call, gateway_config
from tests.process.procs import Processes

ARGV = ["/usr/bin/parley", "serve", "--port", "8080"]


def _variable_of(pid: int, name: str) -> str | None:
    """A variable of a running process's environment (Linux)."""
    environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    prefix = f"{name}=".encode()
    values = [v.partition(b"=")[2].decode() for v in environ if v.startswith(prefix)]
    return values[0] if values else None


def _children(pid: int) -> list[int]:
    return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def _installed(allocator: str) -> str:
    try:
        return library_path(allocator)
    except AllocatorMissing as error:
        pytest.skip(str(error))


def _found(wanted: str) -> str:
    return f"/opt/lib/lib{wanted}.so.2"


def test_serve_runs_on_malloc_when_asked(procs: Processes, tmp_path: Path) -> None:
    if not Path("/proc/self/environ").exists():
        pytest.skip("reads /proc (Linux)")
    engine_url = procs.engine()
    pymalloc = procs.serve(
        gateway_config(engine_url, tmp_path), args=("--allocator", "pymalloc"), name="pymalloc"
    )
    malloc = procs.serve(
        gateway_config(engine_url, tmp_path), args=("--allocator", "malloc"), name="malloc"
    )
    assert _variable_of(pymalloc.pid, "PYTHONMALLOC") is None
    assert _variable_of(malloc.pid, "PYTHONMALLOC") == "malloc"  # the same process, again
    assert "allocator malloc)" in malloc.output()  # the start-up line says which


def test_by_default_serve_runs_on_jemalloc_where_it_is_installed(
    procs: Processes, tmp_path: Path
) -> None:
    path = _installed("jemalloc")  # skips where the library is not installed
    server = procs.serve(gateway_config(procs.engine(), tmp_path))
    assert call(Chat(server.v1, server.create_key())).status == 200
    assert path in Path(f"/proc/{server.pid}/maps").read_text()
    assert _variable_of(server.pid, "PYTHONMALLOC") == "malloc"
    assert "allocator jemalloc)" in server.output()


@pytest.mark.parametrize("allocator", ["jemalloc", "mimalloc"])
def test_serve_and_its_workers_run_on_the_preloaded_allocator(
    procs: Processes, tmp_path: Path, allocator: str
) -> None:
    path = _installed(allocator)  # skips where the library is not installed
    engine_url = procs.engine()
    config = gateway_config(engine_url, tmp_path, limits={"per_worker": True})
    server = procs.serve(config, args=("--allocator", allocator, "--workers", "2"))
    key = server.create_key()
    assert call(Chat(server.v1, key)).status == 200
    workers = _children(server.pid)
    assert len(workers) == 3  # two workers and the usage writer (SQLite)
    for pid in (server.pid, *workers):  # the supervisor, executed again, and its children
        assert path in Path(f"/proc/{pid}/maps").read_text()
        assert _variable_of(pid, "PYTHONMALLOC") == "malloc"
    assert server.terminate() == 0  # and stops as it does on pymalloc


def test_a_missing_library_is_one_line_naming_the_package(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("PYTHONMALLOC", raising=False)
    absent = Library("libparley-absent.so.9", "parley-absent", "libjemalloc2")
    monkeypatch.setitem(heap.LIBRARIES, "jemalloc", absent)
    result = CliRunner().invoke(cli, ["serve", "--allocator", "jemalloc"])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        "parley: --allocator jemalloc: libparley-absent.so.9 is not installed "
        "(Debian, Ubuntu: apt-get install libjemalloc2)"
    ]


def test_the_library_is_found_in_the_folders_then_by_the_linker(tmp_path: Path) -> None:
    def nowhere(name: str) -> str | None:
        return None

    with pytest.raises(AllocatorMissing, match=r"apt-get install libmimalloc2\.0\)$"):
        library_path("mimalloc", [str(tmp_path)], nowhere)
    assert library_path("mimalloc", [str(tmp_path)], {"mimalloc": "libmimalloc.so.2"}.get) == (
        "libmimalloc.so.2"
    )
    (tmp_path / "libmimalloc.so.2").write_bytes(b"")
    assert library_path("mimalloc", [str(tmp_path)], nowhere) == str(tmp_path / "libmimalloc.so.2")


def test_malloc_is_chosen_by_executing_serve_again_with_the_same_arguments() -> None:
    executable, argv, environ = serve_allocator("malloc", {"HOME": "/root"}, ARGV) or ("", [], {})
    assert executable == sys.executable
    assert argv == [sys.executable, *ARGV[1:]]
    assert environ == {"HOME": "/root", "PYTHONMALLOC": "malloc"}


@pytest.mark.parametrize("allocator", ["jemalloc", "mimalloc"])
def test_jemalloc_and_mimalloc_are_preloaded_under_malloc(allocator: str) -> None:
    again = serve_allocator(allocator, {"HOME": "/root"}, ARGV, _found)  # type: ignore[arg-type]
    executable, argv, environ = again or ("", [], {})
    assert (executable, argv) == (sys.executable, [sys.executable, *ARGV[1:]])
    assert environ == {
        "HOME": "/root",
        "PYTHONMALLOC": "malloc",
        "LD_PRELOAD": f"/opt/lib/lib{allocator}.so.2",
    }


@pytest.mark.parametrize(
    ("preloaded", "then"),
    [
        ("/lib/libfaketime.so.1", "/opt/lib/libjemalloc.so.2 /lib/libfaketime.so.1"),
        ("/lib/a.so:/lib/b.so", "/opt/lib/libjemalloc.so.2 /lib/a.so /lib/b.so"),
        ("/lib/a.so /opt/lib/libjemalloc.so.2", "/lib/a.so /opt/lib/libjemalloc.so.2"),
        ("", "/opt/lib/libjemalloc.so.2"),
    ],
)
def test_a_preload_already_set_is_kept_after_the_allocator(preloaded: str, then: str) -> None:
    environ = allocator_environment("jemalloc", {"LD_PRELOAD": preloaded}, _found)
    assert environ["LD_PRELOAD"] == then


def test_auto_is_jemalloc_where_installed_else_pymalloc() -> None:
    def nowhere(wanted: str) -> str:
        raise AllocatorMissing(wanted)

    assert resolved("auto", _found) == "jemalloc"
    assert resolved("auto", nowhere) == "pymalloc"
    assert resolved("mimalloc", nowhere) == "mimalloc"  # asked by name: its own error later
    again = serve_allocator("auto", {}, ARGV, _found)
    assert again is not None and again[2]["LD_PRELOAD"] == "/opt/lib/libjemalloc.so.2"
    assert serve_allocator("auto", {}, ARGV, nowhere) is None


@pytest.mark.parametrize(
    ("environ", "named"),
    [
        ({}, "pymalloc"),
        ({"PYTHONMALLOC": "malloc"}, "malloc"),
        ({"PYTHONMALLOC": "malloc", "LD_PRELOAD": "/a.so /usr/lib/libjemalloc.so.2"}, "jemalloc"),
        ({"PYTHONMALLOC": "malloc", "LD_PRELOAD": "/usr/lib/libmimalloc.so.2"}, "mimalloc"),
        ({"PYTHONMALLOC": "debug"}, "debug"),  # the operator's own choice, as it is
    ],
)
def test_the_running_allocator_is_read_from_the_environment(
    environ: dict[str, str], named: str
) -> None:
    assert running_allocator(environ) == named


def test_pymalloc_changes_nothing() -> None:
    assert allocator_environment("pymalloc", {"LD_PRELOAD": "/lib/a.so"}, _found) == {
        "LD_PRELOAD": "/lib/a.so"
    }


@pytest.mark.parametrize(
    ("wanted", "environ"),
    [
        ("pymalloc", {}),
        ("malloc", {"PYTHONMALLOC": "pymalloc"}),  # the operator's choice
        ("jemalloc", {"PYTHONMALLOC": "pymalloc"}),
        ("malloc", {"PYTHONMALLOC": "malloc"}),  # already executed again: once only
        ("jemalloc", {"PYTHONMALLOC": "malloc", "LD_PRELOAD": "/opt/lib/libjemalloc.so.2"}),
    ],
)
def test_no_second_execution_when_not_needed(wanted: str, environ: dict[str, str]) -> None:
    assert serve_allocator(wanted, environ, ARGV, _found) is None  # type: ignore[arg-type]
