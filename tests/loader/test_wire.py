"""The worker -> main message stream: descriptors travel with their message, and a message
that carried too many leaves the stream in step, with nothing left open."""

from __future__ import annotations

import array
import os
import pickle
import socket
import struct
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from thresher.loader.pool import wire


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _close(fds: list[int]) -> None:
    for fd in fds:
        os.close(fd)


def _raw_send(sock: socket.socket, header: object, meta: bytes, fds: list[int]) -> None:
    """What a peer without send()'s check would write (wire's own format)."""
    head = pickle.dumps(header, protocol=5)
    parts = [struct.pack("!QQ", len(head), len(meta)), head, meta]
    sock.sendmsg(parts, [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])


@settings(max_examples=15, deadline=None)
@given(st.lists(st.tuples(st.binary(max_size=3000), st.integers(0, wire.MAX_FDS)), min_size=1, max_size=4))
def test_messages_arrive_whole_with_their_descriptors(messages: list[tuple[bytes, int]]) -> None:
    before = _open_fds()
    a, b = socket.socketpair()
    try:
        for i, (meta, n) in enumerate(messages):
            fds = [os.open(os.devnull, os.O_RDONLY) for _ in range(n)]
            wire.send(a, ("ok", i), meta, fds)
            _close(fds)
            header, got_meta, got = wire.receive(b)
            assert header == ("ok", i)
            assert bytes(got_meta) == meta
            assert len(got) == n
            _close(got)
    finally:
        a.close()
        b.close()
    assert _open_fds() == before


def test_send_refuses_more_descriptors_than_a_message_carries() -> None:
    a, b = socket.socketpair()
    fds = [os.open(os.devnull, os.O_RDONLY) for _ in range(wire.MAX_FDS + 1)]
    try:
        with pytest.raises(ValueError, match=f"at most {wire.MAX_FDS} file descriptors"):
            wire.send(a, ("ok", 0), b"x", fds)
        b.setblocking(False)
        with pytest.raises(BlockingIOError):  # nothing was sent
            b.recv(1)
    finally:
        _close(fds)
        a.close()
        b.close()


@pytest.mark.parametrize("meta_size", [0, 10, 3 << 20])
def test_a_message_with_too_many_descriptors_is_dropped_whole(meta_size: int) -> None:
    baseline = _open_fds()
    a, b = socket.socketpair()
    fds = [os.open(os.devnull, os.O_RDONLY) for _ in range(wire.MAX_FDS + 6)]
    try:
        def write() -> None:  # a large message fills the socket's buffer: written while read
            _raw_send(a, ("ok", 1), b"m" * meta_size, fds)
            wire.send(a, ("ok", 2), b"next")

        writer = threading.Thread(target=write)
        writer.start()
        with pytest.raises(wire.TooManyDescriptors, match=f"more than {wire.MAX_FDS} file descriptors"):
            wire.receive(b)
        header, meta, got = wire.receive(b)  # the stream is still in step
        writer.join()
        assert (header, bytes(meta), got) == (("ok", 2), b"next", [])
    finally:
        _close(fds)
        a.close()
        b.close()
    assert _open_fds() == baseline  # the descriptors that did arrive were closed
