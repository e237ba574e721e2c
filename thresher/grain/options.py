"""Grain's ``ReadOptions`` and ``MultiprocessingOptions``.

Example:
    >>> import thresher.grain as grain
    >>> grain.MultiprocessingOptions(num_workers=2).per_worker_buffer_size
    1
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from thresher._validate import check_count, is_int
from thresher.errors import ConfigError

__all__ = ["MultiprocessingOptions", "ReadOptions"]


def _count(value: object, what: str) -> None:
    check_count(value, what)


@dataclass
class ReadOptions:
    """Grain's read options. A DataLoader maps them onto ``thresher.ReadOptions``:
    ``num_threads`` reads in flight in each process, ``prefetch_buffer_size`` records read
    ahead; the batches are the same for any values.

    Example:
        >>> from thresher.grain import ReadOptions
        >>> ReadOptions(num_threads=8)
        ReadOptions(num_threads=8, prefetch_buffer_size=500)
    """

    num_threads: int = 16
    prefetch_buffer_size: int = 500

    def __post_init__(self) -> None:
        _count(self.num_threads, "ReadOptions.num_threads")
        _count(self.prefetch_buffer_size, "ReadOptions.prefetch_buffer_size")


@dataclass
class MultiprocessingOptions:
    """Grain's worker options: ``num_workers`` processes, each computing
    ``per_worker_buffer_size`` chunks ahead. Results never depend on either.

    ``enable_profiling`` is accepted; thresher's profile is ``iterator.stats()`` on
    the iterator of a thresher DataLoader or Dataset.

    Example:
        >>> from thresher.grain import MultiprocessingOptions
        >>> MultiprocessingOptions(num_workers=4).num_workers
        4
    """

    num_workers: int = 0
    per_worker_buffer_size: int = 1
    enable_profiling: bool = False

    def __post_init__(self) -> None:
        _count(self.num_workers, "MultiprocessingOptions.num_workers")
        _count(self.per_worker_buffer_size, "MultiprocessingOptions.per_worker_buffer_size")


def check_read_options(obj: Any, where: str) -> Any:
    """Checks a Grain-style ReadOptions (num_threads, prefetch_buffer_size) and returns it.

    thresher reads each chunk's records in one batched call in the process that
    computes the chunk, so these change nothing; a malformed one is still refused.
    """
    if obj is None:
        return None
    values = [getattr(obj, name, None) for name in ("num_threads", "prefetch_buffer_size")]
    if not all(is_int(v, minimum=0) for v in values):
        raise ConfigError(f"{where} got {obj!r}: pass ReadOptions(num_threads=..., prefetch_buffer_size=...) "
                          "with ints >= 0, or None")
    return obj
