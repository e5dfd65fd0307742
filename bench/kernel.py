"""What Linux says about listening sockets and processes: a socket's accept backlog, the
machine's listen-queue overflows, a process's resident memory (with its children).

Linux only; each reader returns ``None`` where the information is not available.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path


def listen_backlog(port: int) -> int | None:
    """The accept backlog of the socket listening on ``port`` (``ss``'s Send-Q for a
    listening socket: the ``listen()`` argument, after the kernel capped it at
    ``net.core.somaxconn``)."""
    ss = shutil.which("ss")
    if ss is None:
        return None
    done = subprocess.run(
        [ss, "-ltnH", f"sport = :{port}"], capture_output=True, text=True, check=False
    )
    for line in done.stdout.splitlines():
        fields = line.split()
        if len(fields) >= 4 and fields[0] == "LISTEN":
            return int(fields[2])
    return None


def somaxconn() -> int | None:
    """``net.core.somaxconn``: the largest backlog ``listen()`` is granted."""
    try:
        return int(Path("/proc/sys/net/core/somaxconn").read_text())
    except (OSError, ValueError):
        return None


def listen_overflows() -> int | None:
    """``TcpExt: ListenOverflows`` from ``/proc/net/netstat``: connections the kernel dropped
    because an accept queue was full, machine-wide (this network namespace), since boot."""
    return _tcp_ext("ListenOverflows")


def _tcp_ext(name: str) -> int | None:
    try:
        lines = Path("/proc/net/netstat").read_text().splitlines()
    except OSError:
        return None
    for names, values in zip(lines[::2], lines[1::2], strict=False):
        if names.startswith("TcpExt:"):
            table = dict(zip(names.split()[1:], values.split()[1:], strict=False))
            return int(table[name]) if name in table else None
    return None


def children(pid: int) -> list[int]:
    """The direct children of ``pid`` (a supervisor's workers)."""
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for task in tasks:
        try:
            found += [int(c) for c in Path(f"/proc/{pid}/task/{task}/children").read_text().split()]
        except OSError:
            continue
    return found


def rss_mb(pid: int) -> float | None:
    """Resident memory of one process, in MB (VmRSS)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return None


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of a process, or None if unknown."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def tree(pid: int) -> list[int]:
    """``pid`` and its direct children (a supervisor and its workers)."""
    return [pid, *children(pid)]


def machine_busy_seconds() -> float | None:
    """CPU seconds every core of the machine spent on anything but idling, so far."""
    try:
        first = Path("/proc/stat").read_text().split("\n", 1)[0].split()
    except OSError:
        return None
    ticks = [int(value) for value in first[1:]]
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)  # idle + iowait
    return (sum(ticks[:8]) - idle) / os.sysconf("SC_CLK_TCK")
