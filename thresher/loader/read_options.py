"""ReadOptions: how many reads a producer keeps in flight, and how far ahead they start.

On storage where every read waits (a network filesystem, a bucket mounted with FUSE,
a database), one read at a time leaves the CPU idle. Each producer (this process with
``worker_count=0``, each worker process otherwise) can keep ``num_threads`` reads
waiting at once and start the reads of the next chunks while the current one is
transformed. Reads still land in position order, so batches do not change.

Example:
    >>> import thresher as th
    >>> opts = th.ReadOptions(num_threads=8, prefetch_buffer_size=256)
    >>> opts.threads_for(th.sources.RangeDataSource(0, 4)), opts.chunks_ahead(128)
    (8, 2)
    >>> th.ReadOptions().threads_for(th.sources.RangeDataSource(0, 4))   # the source's suggestion
    0
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from thresher._validate import is_int, is_seconds
from thresher.errors import ConfigError
from thresher.sources.protocol import suggested_reads_in_flight

__all__ = ["MAX_READ_THREADS", "ReadOptions"]

MAX_READ_THREADS = 256
"""The most reads in flight one producer may keep (threads cost memory and switches)."""


@dataclass(frozen=True)
class ReadOptions:
    """Reads in flight per producer (Grain's field names).

    Attributes:
        num_threads: reads in flight in each producer (threads reading contiguous
            slices of the next chunks' keys). None (default): what the source
            suggests (``suggested_reads_in_flight``: 0 for a source with batched
            reads such as ArrayRecordSource on local files, 16 for a source with
            only ``__getitem__``). 0: reads run inline, one call per chunk.
            With ``worker_count="auto"``, a None is chosen from the measured read
            latency and CPU time instead.
        prefetch_buffer_size: records whose reads start ahead of the transforms
            (rounded up to whole chunks; 0: only the current chunk's reads overlap).
        timeout_s: seconds a chunk's reads may take on threads before the loader
            raises a SourceError naming the keys (None: wait forever).

    Batches are the same for every value: only speed changes.
    """

    num_threads: int | None = None
    prefetch_buffer_size: int = 500
    timeout_s: float | None = 300.0

    def __post_init__(self) -> None:
        n = self.num_threads
        if n is not None and not is_int(n, minimum=0, maximum=MAX_READ_THREADS):
            raise ConfigError(f"ReadOptions(num_threads={n!r}): must be None or an int in [0, {MAX_READ_THREADS}]")
        p = self.prefetch_buffer_size
        if not is_int(p, minimum=0):
            raise ConfigError(f"ReadOptions(prefetch_buffer_size={p!r}): must be an int >= 0")
        t = self.timeout_s
        if t is not None and not is_seconds(t):
            raise ConfigError(f"ReadOptions(timeout_s={t!r}): must be None or a number of seconds > 0")

    def threads_for(self, source: Any) -> int:
        """The reads in flight for ``source``: ``num_threads``, else the source's suggestion."""
        if self.num_threads is not None:
            return self.num_threads
        return min(MAX_READ_THREADS, suggested_reads_in_flight(source))

    def chunks_ahead(self, chunk_size: int) -> int:
        """Chunks whose reads start before the current chunk is transformed."""
        return -(-self.prefetch_buffer_size // max(1, chunk_size))

    @staticmethod
    def coerce(value: Any) -> ReadOptions:
        """A ReadOptions from ``value``: None, a ReadOptions, or an object with the same fields
        (``grain.ReadOptions``)."""
        if value is None:
            return ReadOptions()
        if isinstance(value, ReadOptions):
            return value
        if hasattr(value, "num_threads") and hasattr(value, "prefetch_buffer_size"):
            return ReadOptions(num_threads=value.num_threads, prefetch_buffer_size=value.prefetch_buffer_size,
                               timeout_s=getattr(value, "timeout_s", ReadOptions.timeout_s))
        raise ConfigError(f"read_options must be a thresher.ReadOptions (or grain's ReadOptions), got {value!r}")
