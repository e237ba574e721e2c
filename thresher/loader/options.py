"""LoaderOptions: how a DataLoader computes (never what): workers, chunking, read-ahead.

Example:
    >>> from thresher.loader.options import LoaderOptions
    >>> LoaderOptions(worker_count=2).chunk_size_for(batch_size=100)
    300
    >>> try:
    ...     LoaderOptions(chunk_size=0)
    ... except ValueError as e:
    ...     print(e)
    chunk_size must be an int >= 1 or None, got 0
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from thresher._validate import check_count, check_int

__all__ = ["LoaderOptions", "WorkerCount"]

WorkerCount = int | Literal["auto"]

_MIN_CHUNK_RECORDS = 256


@dataclass(frozen=True)
class LoaderOptions:
    """The DataLoader's speed and memory options, checked when made (ConfigError).

    None of them changes the batches: see ``DataLoader`` for what each one does.
    """

    worker_count: WorkerCount = 0
    chunk_size: int | None = None
    worker_buffer_size: int | None = None

    def __post_init__(self) -> None:
        if self.worker_count != "auto":
            count = check_count(self.worker_count, "worker_count", minimum=0, also='"auto"')
            object.__setattr__(self, "worker_count", count)
        object.__setattr__(
            self, "chunk_size", check_int(self.chunk_size, "chunk_size", minimum=1, optional=True)
        )
        object.__setattr__(
            self,
            "worker_buffer_size",
            check_int(self.worker_buffer_size, "worker_buffer_size", minimum=1, optional=True),
        )

    def chunk_size_for(self, batch_size: int | None) -> int:
        """``chunk_size``, or by default a multiple of the batch size of at least 256."""
        if self.chunk_size is not None:
            return self.chunk_size
        unit = batch_size or 1
        return unit * max(1, -(-_MIN_CHUNK_RECORDS // unit))
