"""Sending worker results to the main process with their arrays in shared memory.

A result is pickled with protocol 5: every contiguous NumPy array of at least
``OOB_MIN_BYTES`` is taken out of the pickle stream ("out of band") and written into
anonymous shared memory (``memfd_create``); smaller arrays and everything else stay
in the (small) pickle. The worker sends the pickle and the file descriptors over its
socket and closes its copies; the main process maps the files and unpickles with
NumPy arrays that are *views onto the mappings*: no copy at all between the
worker's last write and the training loop.

A result with few large arrays (a batch: one per leaf) gets one memory file per
array, so that keeping one leaf (say the labels) keeps only that leaf's memory
alive; a result with many (a chunk of single elements) shares one file.

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
    >>> from thresher.loader.pool.shm import pack, unpack
    >>> packed = pack({"x": np.arange(4096, dtype=np.int32), "y": 7})
    >>> out = unpack(packed.meta, packed.layout, packed.sizes, packed.fds)
    >>> int(out["x"].sum()), out["y"]
    (8386560, 7)
"""

from __future__ import annotations

import mmap
import os
import pickle
from dataclasses import dataclass, field
from typing import Any

__all__ = ["OOB_MIN_BYTES", "Packed", "pack", "shared_memory_available", "unpack"]

OOB_MIN_BYTES = 4096
"""Arrays smaller than this travel inside the pickle: a mapping costs more than copying them."""

MAX_SEGMENTS = 16
"""Up to this many large arrays get a memory file each; more share one."""

_ALIGN = 64
_MAP_FLAGS = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)


def shared_memory_available() -> bool:
    """True where results can travel through anonymous shared memory (Linux)."""
    return hasattr(os, "memfd_create")


@dataclass
class Packed:
    """A pickled result: ``meta`` (the pickle) and the shared-memory files (``fds``,
    of ``sizes`` bytes) holding its large buffers, placed as ``layout``: one
    (file index, offset, nbytes) per buffer. The owner of ``fds`` must close them."""

    meta: bytes
    layout: list[tuple[int, int, int]] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)
    fds: list[int] = field(default_factory=list)

    def close(self) -> None:
        fds, self.fds = self.fds, []
        for fd in fds:
            os.close(fd)


def _write_all(fd: int, data: memoryview, offset: int) -> None:
    while data.nbytes:
        n = os.pwrite(fd, data, offset)
        data, offset = data[n:], offset + n


def _plan(buffers: list[memoryview]) -> tuple[list[tuple[int, int, int]], list[int]]:
    if len(buffers) <= MAX_SEGMENTS:
        return [(i, 0, raw.nbytes) for i, raw in enumerate(buffers)], [raw.nbytes for raw in buffers]
    layout, size = [], 0
    for raw in buffers:
        size = -(-size // _ALIGN) * _ALIGN
        layout.append((0, size, raw.nbytes))
        size += raw.nbytes
    return layout, [size]


def pack(obj: Any) -> Packed:
    """Pickles ``obj``; large contiguous arrays go into new shared-memory files.

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
        return Packed(meta)
    layout, sizes = _plan(buffers)
    packed = Packed(meta, layout, sizes)
    try:
        for size in sizes:
            fd = os.memfd_create("thresher-result", os.MFD_CLOEXEC)
            packed.fds.append(fd)
            os.ftruncate(fd, size)
        for raw, (segment, offset, _) in zip(buffers, layout, strict=False):
            _write_all(packed.fds[segment], raw, offset)
    except BaseException:
        packed.close()
        raise
    return packed


def unpack(meta: bytes | bytearray, layout: list[tuple[int, int, int]], sizes: list[int], fds: list[int]) -> Any:
    """Unpickles a packed result; takes ownership of ``fds`` (closed before returning).

    Arrays that travelled out of band are views onto mappings of the files; a
    mapping is released when the last array on it is garbage-collected.
    """
    views: list[memoryview] = []
    try:
        for fd, size in zip(fds, sizes, strict=False):
            mapping = mmap.mmap(fd, size, flags=_MAP_FLAGS, prot=mmap.PROT_READ | mmap.PROT_WRITE)
            views.append(memoryview(mapping))
    finally:
        for fd in fds:
            os.close(fd)
    if len(views) != len(sizes):
        raise ValueError(f"a result came with {len(views)} shared-memory files, expected {len(sizes)}")
    return pickle.loads(meta, buffers=[views[i][o:o + n] for i, o, n in layout])
