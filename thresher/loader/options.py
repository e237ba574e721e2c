"""LoaderOptions: how a DataLoader computes (never what): workers, chunking, read-ahead.

Example:
    >>> from thresher.loader.options import LoaderOptions
    >>> LoaderOptions(worker_count=2).chunk_size_for(batch_size=100)
    300
    >>> LoaderOptions(worker_count=2).worker_mode, LoaderOptions(worker_count="auto").worker_mode
    ('process', 'auto')
    >>> try:
    ...     LoaderOptions(worker_count=2, worker_mode="fiber")
    ... except ValueError as e:
    ...     print(e)
    worker_mode must be "process" or "thread" (or None: processes, chosen with worker_count="auto"), got 'fiber'
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
from thresher.errors import ConfigError

__all__ = ["WORKER_MODES", "LoaderOptions", "WorkerCount", "WorkerMode"]

WorkerCount = int | Literal["auto"]
WorkerMode = Literal["process", "thread", "auto"]
"""How workers run: ``"process"``, ``"thread"``, or ``"auto"`` (chosen by ``worker_count="auto"``)."""
WORKER_MODES = ("process", "thread")

_MIN_CHUNK_RECORDS = 256


@dataclass(frozen=True)
class LoaderOptions:
    """The DataLoader's speed and memory options, checked when made (ConfigError).

    None of them changes the batches: see ``DataLoader`` for what each one does.
    """

    worker_count: WorkerCount = 0
    chunk_size: int | None = None
    worker_buffer_size: int | None = None
    worker_mode: WorkerMode | None = None

    def __post_init__(self) -> None:
        mode = self.worker_mode
        if mode is not None and (not isinstance(mode, str) or mode not in WORKER_MODES):
            raise ConfigError('worker_mode must be "process" or "thread" (or None: processes, chosen with '
                              f'worker_count="auto"), got {mode!r}')
        if mode is None:
            object.__setattr__(self, "worker_mode", "auto" if self.worker_count == "auto" else "process")
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
