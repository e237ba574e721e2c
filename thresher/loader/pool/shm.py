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
alive; a result with many (a chunk of single elements) shares one file. A process
worker stacks its batches straight into memory files of their own
(:class:`ResultArena`), which are sent as they are: a batch is written once.

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
import threading
import weakref
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["OOB_MIN_BYTES", "RESULTS", "Packed", "ResultArena", "pack", "shared_memory_available", "unpack"]

OOB_MIN_BYTES = 4096
"""Arrays smaller than this travel inside the pickle: a mapping costs more than copying them."""

MAX_SEGMENTS = 16
"""Up to this many large arrays get a memory file each; more share one."""

MAX_LIVE_FILES = 64
"""A :class:`ResultArena` holds at most this many files at once (two descriptors each: its own
and its mapping's); past it, arrays are plain NumPy memory (copied when sent)."""

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


class ResultArena:
    """Arrays made in memory files of their own, which :func:`pack` sends as they are.

    A process worker stacks its batches into these (``Batch`` asks ``empty``: see
    ``thresher.transforms.batch.set_array_allocator``), so a batch is written once, by the
    stacking, instead of stacked and then copied into a memory file. An array smaller than
    ``OOB_MIN_BYTES`` (it travels in the pickle) or of objects is a plain ``np.empty``. A
    file's descriptor is closed when its array is garbage-collected; a view that outlives
    the array keeps the memory mapped, and is copied if it is sent. A result of more than
    ``MAX_SEGMENTS`` large arrays (a chunk of many small batches) is copied as before, and
    past ``MAX_LIVE_FILES`` live files arrays are plain memory: a message carries few
    descriptors and a worker holds few.

    Example:
        >>> import numpy as np
        >>> from thresher.loader.pool.shm import ResultArena, pack, unpack
        >>> arena = ResultArena()
        >>> a = arena.empty((1024, 4), np.float32)
        >>> a[:] = 1.0
        >>> packed = pack({"x": a}, arena)
        >>> a[0, 0] = 5.0   # the packed result is this memory, not a copy of it
        >>> out = unpack(packed.meta, packed.layout, packed.sizes, packed.fds)
        >>> float(out["x"][0, 0]), float(out["x"].sum())
        (5.0, 4100.0)
    """

    def __init__(self) -> None:
        self._files: dict[int, tuple[int, int]] = {}  # data address -> (descriptor, bytes)
        self._lock = threading.Lock()

    def empty(self, shape: Any, dtype: Any = float) -> np.ndarray:
        """``np.empty(shape, dtype)``, in a memory file of its own where results travel in them."""
        dt = np.dtype(dtype)
        count = int(np.prod(shape, dtype=np.int64))
        nbytes = count * dt.itemsize
        if (nbytes < OOB_MIN_BYTES or dt.hasobject or not shared_memory_available()
                or len(self._files) >= MAX_LIVE_FILES):
            return np.empty(shape, dt)
        fd = os.memfd_create("thresher-result", os.MFD_CLOEXEC)
        try:
            os.ftruncate(fd, nbytes)
            mapping = mmap.mmap(fd, nbytes, flags=_MAP_FLAGS, prot=mmap.PROT_READ | mmap.PROT_WRITE)
        except BaseException:
            os.close(fd)
            raise
        out = np.frombuffer(mapping, dtype=dt, count=count).reshape(shape)
        address = int(out.__array_interface__["data"][0])
        with self._lock:
            self._files[address] = (fd, nbytes)
        weakref.finalize(out, self._forget, address, fd)
        return out

    def _forget(self, address: int, fd: int) -> None:
        with self._lock:
            self._files.pop(address, None)
        os.close(fd)

    def descriptor(self, raw: memoryview) -> int | None:
        """The memory file that is exactly ``raw`` (an array of this arena's, whole), or None."""
        if not self._files or not raw.nbytes:
            return None
        address = int(np.frombuffer(raw, dtype=np.uint8).__array_interface__["data"][0])
        with self._lock:
            held = self._files.get(address)
        return held[0] if held is not None and held[1] == raw.nbytes else None

    def __len__(self) -> int:
        return len(self._files)


RESULTS = ResultArena()
"""The arena process workers stack their batches into (see worker_main)."""


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


def pack(obj: Any, arena: ResultArena | None = RESULTS) -> Packed:
    """Pickles ``obj``; large contiguous arrays go into new shared-memory files, except those
    made by ``arena`` (see :class:`ResultArena`), which are sent in their own files as they are.

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
    # a result sends at most MAX_SEGMENTS files (wire.MAX_FDS a message): with more buffers, all are copied
    own = [None if arena is None or len(buffers) > MAX_SEGMENTS else arena.descriptor(raw) for raw in buffers]
    copied = [raw for raw, fd in zip(buffers, own, strict=True) if fd is None]
    copied_layout, sizes = _plan(copied) if copied else ([], [])
    layout: list[tuple[int, int, int]] = []
    owned: list[int] = []
    placed = iter(copied_layout)
    for raw, fd in zip(buffers, own, strict=True):
        if fd is None:
            layout.append(next(placed))
        else:  # a file of its own, after the new ones
            layout.append((len(sizes) + len(owned), 0, raw.nbytes))
            owned.append(fd)
    packed = Packed(meta, layout, sizes + [raw.nbytes for raw, fd in zip(buffers, own, strict=True)
                                           if fd is not None])
    try:
        for size in sizes:
            fd = os.memfd_create("thresher-result", os.MFD_CLOEXEC)
            packed.fds.append(fd)
            os.ftruncate(fd, size)
        for raw, (segment, offset, _) in zip(copied, copied_layout, strict=True):
            _write_all(packed.fds[segment], raw, offset)
        for fd in owned:
            packed.fds.append(os.dup(fd))
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
