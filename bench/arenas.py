"""pymalloc's arenas, read in place, and what lives in the ones a burst left behind.

CPython 3.11 on x86-64 Linux only (``bench.burst_heap`` uses it inside a worker): the
arena table is a static variable of libpython, found with ``nm``; the layouts below are
3.11's ``obmalloc.c`` (an arena record of 48 bytes, pools of 16 KiB with a 48-byte
header). Each arena made since a mark is copied whole, then each used block of each used
pool is named by the type its object header points to (at 0, 16 or 32 bytes: GC and
managed-dict pre-headers): ``free:<type>`` when its reference count is 0 (a dead object
kept on an extension's free list), ``?<size>`` when it is no object (a buffer).
"""

from __future__ import annotations

import collections
import ctypes
import struct
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path
from typing import Any

POOL = 1 << 14
ARENA = 1 << 20
Arena = tuple[int, int]  # (address, first never-used pool)


def supported() -> bool:
    return sys.version_info[:2] == (3, 11) and sys.platform == "linux" and _library() is not None


def _library() -> Path | None:
    name = sysconfig.get_config_var("INSTSONAME")
    found = Path(sysconfig.get_config_var("LIBDIR") or "/") / (name or "")
    return found if name and found.is_file() else None


def _table() -> tuple[int, int]:
    """Addresses of ``arenas`` and ``maxarenas`` in this process."""
    library = _library()
    assert library is not None
    symbols: dict[str, int] = {}
    listing = subprocess.run(["nm", str(library)], capture_output=True, text=True, check=True)
    for line in listing.stdout.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[2] in ("arenas", "maxarenas", "PyObject_Malloc"):
            symbols[parts[2]] = int(parts[0], 16)
    loaded = ctypes.cast(ctypes.pythonapi.PyObject_Malloc, ctypes.c_void_p).value or 0
    base = loaded - symbols["PyObject_Malloc"]
    return base + symbols["arenas"], base + symbols["maxarenas"]


def arenas() -> list[Arena]:
    table, count = _table()
    first = ctypes.c_uint64.from_address(table).value
    found = []
    for index in range(ctypes.c_uint32.from_address(count).value):
        record = ctypes.string_at(first + 48 * index, 48)
        address, pool_address = struct.unpack_from("QQ", record)
        if address:
            found.append((address, pool_address))
    return found


def _used_blocks(raw: bytes, at: int, pool: int) -> Iterator[tuple[int, int]]:
    """(offset, size) of each used block of the pool at ``pool``, copied at ``at`` in ``raw``."""
    count = struct.unpack_from("I", raw, at)[0]
    szidx, nextoffset = struct.unpack_from("II", raw, at + 36)
    if not count:
        return
    size = (szidx + 1) * 16
    free: set[int] = set()
    link = struct.unpack_from("Q", raw, at + 8)[0]
    while link and pool <= link < pool + POOL and len(free) < POOL // 16:
        free.add(link - pool)
        link = struct.unpack_from("Q", raw, at + link - pool)[0]
    offset = 48
    while offset < nextoffset and offset + size <= POOL:
        if offset not in free:
            yield offset, size
        offset += size


def _types() -> dict[int, type]:
    seen: dict[int, type] = {}
    stack: list[type] = [object]
    while stack:
        kind = stack.pop()
        if id(kind) not in seen:
            seen[id(kind)] = kind
            stack.extend(type.__subclasses__(kind))
    return seen


def _name(raw: bytes, at: int, size: int, types: dict[int, type]) -> str:
    for pre in (0, 16, 32):
        if pre + 16 > size:
            break
        refcount, kind = struct.unpack_from("QQ", raw, at + pre)
        if kind in types:
            found = types[kind]
            name = found.__qualname__
            if found.__module__ != "builtins":
                name = f"{found.__module__}.{name}"
            return f"free:{name}" if refcount == 0 else name
    return f"?{size}"


def survey(marked: set[int]) -> dict[str, Any]:
    """What lives in the arenas that are not in ``marked`` (addresses from ``arenas()``)."""
    listed = arenas()
    copies = [(arena, ctypes.string_at(arena[0], ARENA)) for arena in listed]
    copies = [(arena, raw) for arena, raw in copies if arena[0] not in marked]
    types = _types()
    blocks: collections.Counter[str] = collections.Counter()
    holding: collections.Counter[str] = collections.Counter()
    per_arena = []
    pools = 0
    for (address, pool_address), raw in copies:
        names: collections.Counter[str] = collections.Counter()
        pool = (address + POOL - 1) & ~(POOL - 1)
        while pool < pool_address:
            at = pool - address
            used = list(_used_blocks(raw, at, pool))
            pools += bool(used)
            for offset, size in used:
                names[_name(raw, at + offset, size, types)] += 1
            pool += POOL
        blocks.update(names)
        holding.update(names.keys())
        per_arena.append(sum(names.values()))
    return {
        "arenas": len(listed),
        "new_arenas": len(copies),
        "used_pools": pools,
        "used_blocks": sum(blocks.values()),
        "blocks_per_arena": sorted(per_arena),
        "blocks": blocks.most_common(40),
        "arenas_holding": holding.most_common(40),
    }
