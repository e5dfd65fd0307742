"""Checking, before ``serve`` says it is serving, that it can listen where it was told to.

A port already taken is the most common first-hour failure. Instead of a traceback after
the "serving on" line, ``serve`` binds a probe socket first and, when that fails, says in
one line which address and, on Linux, which process may hold it (from ``/proc/net/tcp``
and the processes' ``/proc/<pid>/fd`` links that this user may read).
"""

from __future__ import annotations

import errno
import socket
from collections.abc import Iterator
from pathlib import Path

LISTEN_STATE = "0A"
PROC = Path("/proc")


class CannotListen(Exception):
    """The address cannot be listened on; the message is one line for the operator."""


def check_listen(host: str, port: int, *, reuse_port: bool) -> None:
    """Bind (and release) ``host:port`` as the server will; ``CannotListen`` if refused."""
    try:
        infos = socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except socket.gaierror as error:
        raise CannotListen(f"cannot listen on {host}:{port}: {error.strerror}") from None
    for family, kind, proto, _, address in infos:
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if reuse_port and hasattr(socket, "SO_REUSEPORT"):
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            try:
                probe.bind(address)
                probe.listen(1)
            except OSError as error:
                raise CannotListen(_why(host, port, error)) from None


def _why(host: str, port: int, error: OSError) -> str:
    where = f"{host}:{port}"
    if error.errno == errno.EADDRINUSE:
        holder = port_holder(port)
        held = f" (held by {holder})" if holder else " (by another process)"
        return (
            f"cannot listen on {where}: the port is already in use{held}; "
            "stop it or choose another port with --port"
        )
    if error.errno == errno.EACCES:
        return f"cannot listen on {where}: permission denied (ports below 1024 need privileges)"
    if error.errno == errno.EADDRNOTAVAIL:
        return f"cannot listen on {where}: {host} is not an address of this machine"
    return f"cannot listen on {where}: {error.strerror or error}"


def port_holder(port: int) -> str | None:
    """``pid 1234 (python -m http.server)`` for a process listening on ``port``, if visible."""
    inodes = set(_listening_inodes(port))
    if not inodes:
        return None
    for pid in _pids():
        if inodes & _socket_inodes(pid):
            return f"pid {pid} ({_command(pid)})"
    return None


def _listening_inodes(port: int) -> Iterator[str]:
    for table in ("tcp", "tcp6"):
        try:
            lines = (PROC / "net" / table).read_text(encoding="ascii").splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            listening = len(fields) > 9 and fields[3] == LISTEN_STATE
            if listening and int(fields[1].rsplit(":", 1)[1], 16) == port:
                yield fields[9]


def _pids() -> Iterator[int]:
    try:
        entries = list(PROC.iterdir())
    except OSError:
        return
    for entry in entries:
        if entry.name.isdecimal():
            yield int(entry.name)


def _socket_inodes(pid: int) -> set[str]:
    try:
        fds = list((PROC / str(pid) / "fd").iterdir())
    except OSError:
        return set()  # not ours to read, or gone meanwhile
    return {link[8:-1] for link in map(_link, fds) if link.startswith("socket:[")}


def _link(fd: Path) -> str:
    try:
        return str(fd.readlink())
    except OSError:
        return ""  # closed meanwhile


def _command(pid: int) -> str:
    try:
        raw = (PROC / str(pid) / "cmdline").read_bytes()
    except OSError:
        return "?"
    words = b" ".join(raw.split(b"\0")).decode(errors="replace").split()
    return " ".join(words)[:120] or "?"  # one line, whatever the arguments hold
