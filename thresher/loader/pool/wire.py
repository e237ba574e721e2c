"""Worker -> main messages: a small header, the result's pickle and its descriptors, sent at once.

One message is a 16-byte prefix (the lengths of the two parts), the pickled header,
and ``meta`` (the result's pickle, see :mod:`thresher.loader.pool.shm`), written with one
``sendmsg`` that also carries the shared-memory file descriptors (SCM_RIGHTS) on its
first byte. Sending the descriptors with the data, rather than in a second message,
means the main process wakes up once per chunk with everything it needs: it never
waits on a worker that was descheduled between two sends (on a busy machine that
wait cost milliseconds per chunk).

Example:
    >>> import socket
    >>> from thresher.loader.pool.wire import receive, send
    >>> a, b = socket.socketpair()
    >>> send(a, ("ok", 3), b"payload")
    >>> header, meta, fds = receive(b)
    >>> header, bytes(meta), fds
    (('ok', 3), b'payload', [])
"""

from __future__ import annotations

import array
import contextlib
import os
import pickle
import socket
import struct
from collections.abc import Sequence
from typing import Any

__all__ = ["MAX_FDS", "TooManyDescriptors", "receive", "send"]

MAX_FDS = 64
"""Descriptors one message may carry (a result uses at most shm.MAX_SEGMENTS)."""

_PREFIX = struct.Struct("!QQ")


class TooManyDescriptors(OSError):
    """A message carried more descriptors than ``MAX_FDS``: the kernel dropped some.

    The rest of the message has been read (the stream stays in step) and every descriptor
    that did arrive has been closed.
    """


def send(sock: socket.socket, header: Any, meta: bytes = b"", fds: Sequence[int] = ()) -> None:
    """Sends one message; the caller keeps (and closes) its copies of ``fds``.

    Raises ValueError, sending nothing, for more than ``MAX_FDS`` descriptors: the receiver
    would get only some of them.
    """
    if len(fds) > MAX_FDS:
        raise ValueError(f"a message may carry at most {MAX_FDS} file descriptors, not {len(fds)}")
    head = pickle.dumps(header, protocol=5)
    parts = [_PREFIX.pack(len(head), len(meta)), head, meta]
    total = sum(len(p) for p in parts)
    anc = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))] if fds else []
    sent = sock.sendmsg(parts, anc)
    if sent < total:  # a signal interrupted a large send: the rest goes without descriptors
        sock.sendall(b"".join(parts)[sent:])


def _read_exact(sock: socket.socket, n: int) -> bytearray:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if k == 0:
            raise EOFError("the worker's socket closed in the middle of a message")
        got += k
    return buf


def _skip(sock: socket.socket, n: int) -> None:
    """Reads and drops the next ``n`` bytes."""
    buf = bytearray(min(n, 1 << 20))
    while n > 0:
        k = sock.recv_into(buf, min(n, len(buf)))
        if k == 0:
            raise EOFError("the worker's socket closed in the middle of a message")
        n -= k


def receive(sock: socket.socket) -> tuple[Any, bytes | bytearray, list[int]]:
    """Receives one message: ``(header, meta, fds)``; the caller owns (closes) ``fds``.

    Raises EOFError when the socket is closed before a whole message arrived, and
    TooManyDescriptors (after reading the whole message, so the next one is read
    intact) when it carried more than ``MAX_FDS`` descriptors; either way the descriptors
    received with it are closed.
    """
    fds = array.array("i")
    data, ancdata, flags, _ = sock.recvmsg(_PREFIX.size, socket.CMSG_SPACE(MAX_FDS * fds.itemsize))
    for level, kind, payload in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[:len(payload) - (len(payload) % fds.itemsize)])
    received = list(fds)
    try:
        if not data:
            raise EOFError("the worker's socket is closed")
        if len(data) < _PREFIX.size:
            data += _read_exact(sock, _PREFIX.size - len(data))
        head_n, meta_n = _PREFIX.unpack(data)
        if flags & getattr(socket, "MSG_CTRUNC", 0):
            _skip(sock, head_n + meta_n)
            raise TooManyDescriptors(f"a worker message carried more than {MAX_FDS} file descriptors, so some "
                                     "were lost on the way; the message was dropped")
        head = pickle.loads(_read_exact(sock, head_n))
        meta: bytes | bytearray = _read_exact(sock, meta_n) if meta_n else b""
    except BaseException:
        for fd in received:
            with contextlib.suppress(OSError):
                os.close(fd)
        raise
    return head, meta, received
