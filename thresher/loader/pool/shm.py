"""Sending worker results to the main process with their arrays in shared memory.

A result is pickled with protocol 5: every contiguous NumPy array of at least
``OOB_MIN_BYTES`` is taken out of the pickle stream ("out of band") and written into
anonymous shared memory (``memfd_create``); smaller arrays and everything else stay
in the (small) pickle. The worker sends the pickle and the file descriptors over its
socket and closes its copies (of a file it will make again it keeps one, see below);
the main process maps the files and unpickles with
NumPy arrays that are *views onto the mappings*: no copy at all between the
worker's last write and the training loop.

A result with few large arrays (a batch: one per leaf) gets one memory file per
array, so that keeping one leaf (say the labels) keeps only that leaf's memory
alive; a result with many (a chunk of single elements) shares one file. A process
worker stacks its batches straight into memory files of their own
(:class:`ResultArena`), which are sent as they are: a batch is written once.

A worker's batch files are made again (:class:`ResultArena`): when the main process has
dropped every array on a file (its mapping is garbage-collected; :func:`unpack` calls
``released``), it sends the file's ident back and the worker stacks a later batch of the
same size into it, with no new file, mapping or pages. A file the main process had mapped
when it forked is never released, since the child may still read it.

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

import ctypes
import mmap
import os
import pickle
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["MAX_FREE", "MAX_SENT", "OOB_MIN_BYTES", "RESULTS", "Packed", "ResultArena", "pack",
           "shared_memory_available", "unpack"]

OOB_MIN_BYTES = 4096
"""Arrays smaller than this travel inside the pickle: a mapping costs more than copying them."""

MAX_SEGMENTS = 16
"""Up to this many large arrays get a memory file each; more share one."""

MAX_LIVE_FILES = 64
"""A :class:`ResultArena` holds at most this many files at once (two descriptors each: its own
and its mapping's); past it, arrays are plain NumPy memory (copied when sent)."""

MAX_FREE = 2
"""A :class:`ResultArena` keeps this many free files to make arrays in again, or as many as the
largest result it sent had (a chunk of several batches comes back released at once)."""

MAX_SENT = 64
"""A :class:`ResultArena` watches at most this many sent files for their release; past it, the
oldest is closed once unused (the receiver's mapping keeps its memory as long as it needs it)."""

_ALIGN = 64
_MAP_FLAGS = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)


def shared_memory_available() -> bool:
    """True where results can travel through anonymous shared memory (Linux)."""
    return hasattr(os, "memfd_create")


@dataclass
class Packed:
    """A pickled result: ``meta`` (the pickle) and the shared-memory files (``fds``,
    of ``sizes`` bytes) holding its large buffers, placed as ``layout``: one
    (file index, offset, nbytes) per buffer. ``idents``: per file, the arena's name for
    it when the sender makes it again once released (see :class:`ResultArena`), else
    None. The owner of ``fds`` must close them."""

    meta: bytes
    layout: list[tuple[int, int, int]] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)
    fds: list[int] = field(default_factory=list)
    idents: list[int | None] = field(default_factory=list)

    def close(self) -> None:
        fds, self.fds = self.fds, []
        for fd in fds:
            os.close(fd)


@dataclass(eq=False)
class _Segment:
    """One memory file of a :class:`ResultArena`, mapped once for its whole life."""

    ident: int
    fd: int
    size: int
    mapping: mmap.mmap | None
    in_use: bool = False  # an array of this process is on it
    out: int = 0  # times it was sent and not yet released by the receiver
    kept: bool = True  # False: closed once unused, never made again

    def __del__(self) -> None:  # an arena dropped with files it still held (tests make many)
        fd, self.fd = self.fd, -1
        if fd >= 0:
            try:  # noqa: SIM105 - not contextlib: at interpreter exit its module global may be None
                os.close(fd)
            except Exception:
                pass


class ResultArena:
    """Arrays made in memory files of their own, which :func:`pack` sends as they are,
    and which are made again once the receiver has dropped them.

    A process worker stacks its batches into these (``Batch`` asks ``empty``: see
    ``thresher.transforms.batch.set_array_allocator``), so a batch is written once, by the
    stacking, instead of stacked and then copied into a memory file. An array smaller than
    ``OOB_MIN_BYTES`` (it travels in the pickle) or of objects is a plain ``np.empty``.

    Recycling: a file that was sent (its ``ident`` travels in :attr:`Packed.idents`) stays
    the arena's until the receiver says it dropped every array on it (:meth:`release`,
    with the idents :func:`unpack`'s ``released`` was given), and nothing of this process
    points into it (a view that outlives its array counts: the memory is watched, not the
    array). Then it is free, and the next ``empty`` of its size takes it as it is: no new
    file, no new mapping, no fresh pages for the kernel to clear. Making a 38 MB file and
    its pages cost about 23 ms, as much as decoding 20 JPEG images. At most ``MAX_FREE``
    free files (or as many as the largest result sent had) are kept and ``MAX_SENT`` sent
    ones watched (past that the oldest is closed once unused, the receiver's mapping keeping
    its memory): a worker holds few.

    A result of more than ``MAX_SEGMENTS`` large arrays (a chunk of many small batches) is
    copied as before, and past ``MAX_LIVE_FILES`` files in use, arrays are plain memory: a
    message carries few descriptors and a worker holds few.

    Example:
        >>> import numpy as np
        >>> from thresher.loader.pool.shm import ResultArena, pack, unpack
        >>> arena = ResultArena()
        >>> a = arena.empty((1024, 4), np.float32)
        >>> a[:] = 1.0
        >>> packed = pack({"x": a}, arena)
        >>> a[0, 0] = 5.0   # the packed result is this memory, not a copy of it
        >>> released = []
        >>> out = unpack(packed.meta, packed.layout, packed.sizes, packed.fds, packed.idents, released.append)
        >>> float(out["x"][0, 0]), float(out["x"].sum())
        (5.0, 4100.0)
        >>> del a, out   # both sides dropped it: the receiver says so, and the file is free
        >>> arena.release(released)
        >>> b = arena.empty((1024, 4), np.float32)   # the same file, made again
        >>> float(b[0, 0]), arena.made
        (5.0, 1)
    """

    def __init__(self) -> None:
        self._live: dict[int, tuple[_Segment, int]] = {}  # data address -> (segment, bytes of its array)
        self._sent: dict[int, _Segment] = {}  # ident -> segment out at the receiver, oldest first
        self._free: list[_Segment] = []
        self._next = 0
        self.made = 0  # memory files made (not made again): for tests and benchmarks
        self._keep = MAX_FREE  # free files kept: MAX_FREE, or the files of the largest result sent
        self._lock = threading.RLock()  # RLock: a finalizer can run while this thread holds it

    def empty(self, shape: Any, dtype: Any = float) -> np.ndarray:
        """``np.empty(shape, dtype)``, in a memory file of its own where results travel in them."""
        dt = np.dtype(dtype)
        count = int(np.prod(shape, dtype=np.int64))
        nbytes = count * dt.itemsize
        if nbytes < OOB_MIN_BYTES or dt.hasobject or not shared_memory_available():
            return np.empty(shape, dt)
        with self._lock:
            if len(self._live) >= MAX_LIVE_FILES:
                return np.empty(shape, dt)
            segment = self._take_free(nbytes)
        if segment is None:
            segment = self._new(nbytes)
        assert segment.mapping is not None
        try:
            # A fresh exporter per array: it lives exactly as long as anything points into the memory
            # (numpy's views keep it, not the array), so its finalizer says when the memory is unused.
            holder = (ctypes.c_ubyte * nbytes).from_buffer(segment.mapping)
            out = np.frombuffer(holder, dtype=dt, count=count).reshape(shape)
        except BaseException:
            with self._lock:
                self._unused_now(segment)
            raise
        address = int(out.__array_interface__["data"][0])
        with self._lock:
            segment.in_use = True
            self._live[address] = (segment, nbytes)
        weakref.finalize(holder, self._unused, address, segment).atexit = False
        return out

    def _new(self, nbytes: int) -> _Segment:
        fd = os.memfd_create("thresher-result", os.MFD_CLOEXEC)
        try:
            os.ftruncate(fd, nbytes)
            mapping = mmap.mmap(fd, nbytes, flags=_MAP_FLAGS, prot=mmap.PROT_READ | mmap.PROT_WRITE)
        except BaseException:
            os.close(fd)
            raise
        with self._lock:
            self._next += 1
            self.made += 1
            return _Segment(self._next, fd, nbytes, mapping, in_use=True)

    def _take_free(self, nbytes: int) -> _Segment | None:
        for i, segment in enumerate(self._free):
            if segment.size == nbytes:
                del self._free[i]
                segment.in_use = True
                return segment
        return None

    def _unused(self, address: int, segment: _Segment) -> None:
        with self._lock:
            if self._live.get(address, (None,))[0] is segment:
                del self._live[address]
            self._unused_now(segment)

    def _unused_now(self, segment: _Segment) -> None:
        segment.in_use = False
        if segment.out == 0:
            self._recycle(segment)

    def _recycle(self, segment: _Segment) -> None:
        """``segment`` is unused here and dropped by every receiver: free, or closed."""
        if not segment.kept:
            self._close(segment)
            return
        self._free.append(segment)
        if len(self._free) > self._keep:
            self._close(self._free.pop(0))

    @staticmethod
    def _close(segment: _Segment) -> None:
        # The mapping goes with its last reference (an exporter being finalized still holds it).
        segment.kept, segment.mapping = False, None
        fd, segment.fd = segment.fd, -1
        if fd >= 0:
            os.close(fd)

    def descriptor(self, raw: memoryview) -> tuple[int, int] | None:
        """The memory file that is exactly ``raw`` (an array of this arena's, whole), as
        ``(descriptor, ident)``, counted as sent until :meth:`release`; or None."""
        if not self._live or not raw.nbytes:
            return None
        address = int(np.frombuffer(raw, dtype=np.uint8).__array_interface__["data"][0])
        with self._lock:
            held = self._live.get(address)
            if held is None or held[1] != raw.nbytes:
                return None
            segment = held[0]
            segment.out += 1
            self._sent.pop(segment.ident, None)
            self._sent[segment.ident] = segment  # the newest last
            while len(self._sent) > MAX_SENT:  # the oldest is forgotten: closed once unused
                oldest = self._sent.pop(next(iter(self._sent)))
                oldest.kept, oldest.out = False, 0
                if not oldest.in_use:
                    self._close(oldest)
            return segment.fd, segment.ident

    def sent_together(self, files: int) -> None:
        """One result carried ``files`` of this arena's files (they come back released together)."""
        with self._lock:
            self._keep = max(self._keep, min(files, MAX_SEGMENTS))

    def release(self, idents: Any) -> None:
        """The receiver dropped every array on these sent files (one ident per time sent)."""
        with self._lock:
            for ident in idents:
                segment = self._sent.get(ident)
                if segment is None:  # forgotten (MAX_SENT), or not this arena's
                    continue
                segment.out -= 1
                if segment.out <= 0:
                    segment.out = 0
                    del self._sent[ident]
                    if not segment.in_use:
                        self._recycle(segment)

    def clear(self) -> None:
        """Closes the free files and forgets the sent ones (each closed once unused)."""
        with self._lock:
            free, self._free = self._free, []
            for segment in free:
                self._close(segment)
            sent, self._sent = self._sent, {}
            for segment in sent.values():
                segment.kept, segment.out = False, 0
                if not segment.in_use:
                    self._close(segment)

    def __len__(self) -> int:
        """Files with an array of this process on them."""
        return len(self._live)

    @property
    def free(self) -> int:
        """Files ready to be made again."""
        return len(self._free)


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
    copied = [raw for raw, file in zip(buffers, own, strict=True) if file is None]
    copied_layout, sizes = _plan(copied) if copied else ([], [])
    layout: list[tuple[int, int, int]] = []
    owned: list[tuple[int, int]] = []
    placed = iter(copied_layout)
    for raw, file in zip(buffers, own, strict=True):
        if file is None:
            layout.append(next(placed))
        else:  # a file of its own, after the new ones
            layout.append((len(sizes) + len(owned), 0, raw.nbytes))
            owned.append(file)
    if owned and arena is not None:
        arena.sent_together(len(owned))
    packed = Packed(meta, layout, sizes + [raw.nbytes for raw, file in zip(buffers, own, strict=True)
                                           if file is not None],
                    idents=[None] * len(sizes) + [ident for _, ident in owned])
    try:
        for size in sizes:
            fd = os.memfd_create("thresher-result", os.MFD_CLOEXEC)
            packed.fds.append(fd)
            os.ftruncate(fd, size)
        for raw, (segment, offset, _) in zip(copied, copied_layout, strict=True):
            _write_all(packed.fds[segment], raw, offset)
        for fd, _ in owned:
            packed.fds.append(os.dup(fd))
    except BaseException:
        packed.close()
        raise
    return packed


class _Forks:
    """Counts this process's forks (``os.fork``): a mapping that existed at a fork may be read
    by the child, so its file is never released to be written again."""

    generation = 0
    watching = False

    @classmethod
    def watch(cls) -> None:
        if not cls.watching and hasattr(os, "register_at_fork"):
            cls.watching = True
            os.register_at_fork(before=cls._forking)

    @classmethod
    def _forking(cls) -> None:
        cls.generation += 1


def _dropped(released: Callable[[int], Any], ident: int, generation: int) -> None:
    if generation == _Forks.generation:
        released(ident)


def unpack(meta: bytes | bytearray, layout: list[tuple[int, int, int]], sizes: list[int], fds: list[int],
           idents: list[int | None] | None = None, released: Callable[[int], Any] | None = None) -> Any:
    """Unpickles a packed result; takes ownership of ``fds`` (closed before returning).

    Arrays that travelled out of band are views onto mappings of the files; a
    mapping is released when the last array on it is garbage-collected. Then, for a
    file the sender makes again (``idents[i]`` not None), ``released(idents[i])`` is
    called (from whichever thread dropped the last array), unless this process forked
    while the mapping existed. Pass those idents back to the sender's
    :meth:`ResultArena.release`.
    """
    views: list[memoryview] = []
    try:
        for i, (fd, size) in enumerate(zip(fds, sizes, strict=False)):
            mapping = mmap.mmap(fd, size, flags=_MAP_FLAGS, prot=mmap.PROT_READ | mmap.PROT_WRITE)
            views.append(memoryview(mapping))
            ident = None if idents is None or i >= len(idents) else idents[i]
            if ident is not None and released is not None:
                _Forks.watch()
                # the mapping lives as long as any array (or view) on it: numpy keeps it, through its buffer
                weakref.finalize(mapping, _dropped, released, ident, _Forks.generation).atexit = False
    finally:
        for fd in fds:
            os.close(fd)
    if len(views) != len(sizes):
        raise ValueError(f"a result came with {len(views)} shared-memory files, expected {len(sizes)}")
    return pickle.loads(meta, buffers=[views[i][o:o + n] for i, o, n in layout])
