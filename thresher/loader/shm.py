"""Sending worker results to the main process with their arrays in shared memory.

A result is pickled with protocol 5: every contiguous NumPy array of at least
``OOB_MIN_BYTES`` is taken out of the pickle stream ("out of band") and written into
one anonymous shared-memory file (``memfd_create``) per result; smaller arrays and
everything else stay in the (small) pickle. The worker sends the pickle and the
file descriptor over its socket and closes its copy; the main process maps the file
and unpickles with NumPy arrays that are *views onto the mapping*: no copy at all
between the worker's last write and the training loop.

Why memfd, and why this can never leak:

- A memfd has no name. Nothing ever appears in ``/dev/shm``, and the memory belongs
  to whoever holds the descriptor or a mapping. When the last of them goes (the
  arrays are garbage-collected, the socket is closed with a descriptor still in
  flight, or any process is killed, SIGKILL included), the kernel frees it.
- It is not limited by the size of ``/dev/shm`` (64 MiB in a default Docker
  container, a classic cause of "bus error" in other loaders).

Where ``os.memfd_create`` does not exist (macOS, Windows) results are pickled in
band instead: correct, only one copy more.

Example:
    >>> import numpy as np
    >>> from thresher.loader.shm import pack, unpack
    >>> packed = pack({"x": np.arange(4096, dtype=np.int32), "y": 7})
    >>> out = unpack(packed.meta, packed.layout, packed.fd, packed.size)
    >>> int(out["x"].sum()), out["y"]
    (8386560, 7)
"""

from __future__ import annotations

import mmap
import os
import pickle
from dataclasses import dataclass
from typing import Any

__all__ = ["OOB_MIN_BYTES", "Packed", "pack", "shared_memory_available", "unpack"]

OOB_MIN_BYTES = 4096
"""Arrays smaller than this travel inside the pickle: a mapping costs more than copying them."""

_ALIGN = 64
_MAP_FLAGS = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)


def shared_memory_available() -> bool:
    """True where results can travel through anonymous shared memory (Linux)."""
    return hasattr(os, "memfd_create")


@dataclass
class Packed:
    """A pickled result: ``meta`` (the pickle), and the shared-memory file holding its
    large buffers (``fd``, ``size`` bytes, buffer ``layout`` as (offset, nbytes)),
    or ``fd=None`` when everything is in ``meta``. The owner of ``fd`` must close it."""

    meta: bytes
    layout: list[tuple[int, int]]
    size: int
    fd: int | None

    def close(self) -> None:
        if self.fd is not None:
            fd, self.fd = self.fd, None
            os.close(fd)


def _write_all(fd: int, data: memoryview, offset: int) -> None:
    while data.nbytes:
        n = os.pwrite(fd, data, offset)
        data, offset = data[n:], offset + n


def pack(obj: Any) -> Packed:
    """Pickles ``obj``; large contiguous arrays go into a new shared-memory file.

    Raises whatever pickling raises (e.g. TypeError for a lock or a generator); no
    descriptor is left open then.
    """
    buffers: list[memoryview] = []
    use_shm = shared_memory_available()

    def out_of_band(buffer: pickle.PickleBuffer) -> bool:
        raw = buffer.raw()
        if not use_shm or raw.nbytes < OOB_MIN_BYTES:
            return True  # true: keep it in band
        buffers.append(raw)
        return False

    meta = pickle.dumps(obj, protocol=5, buffer_callback=out_of_band)
    if not buffers:
        return Packed(meta, [], 0, None)
    layout: list[tuple[int, int]] = []
    size = 0
    for raw in buffers:
        size = -(-size // _ALIGN) * _ALIGN
        layout.append((size, raw.nbytes))
        size += raw.nbytes
    fd = os.memfd_create("thresher-result", os.MFD_CLOEXEC)
    try:
        os.ftruncate(fd, size)
        for raw, (offset, _) in zip(buffers, layout):
            _write_all(fd, raw, offset)
    except BaseException:
        os.close(fd)
        raise
    return Packed(meta, layout, size, fd)


def unpack(meta: bytes, layout: list[tuple[int, int]], fd: int | None, size: int) -> Any:
    """Unpickles a packed result; takes ownership of ``fd`` (closed before returning).

    Arrays that travelled out of band are views onto one mapping of the file; the
    mapping is released when the last of them is garbage-collected.
    """
    if fd is None:
        return pickle.loads(meta)
    try:
        mapping = mmap.mmap(fd, size, flags=_MAP_FLAGS, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    finally:
        os.close(fd)
    view = memoryview(mapping)
    return pickle.loads(meta, buffers=[view[o:o + n] for o, n in layout])
