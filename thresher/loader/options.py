"""LoaderOptions: how a DataLoader computes (never what): workers, chunking, read-ahead, the watchdog.

The one options object: ``DataLoader`` and ``Dataset.prefetch`` make it from their keyword
arguments, and it travels whole to the ``Engine``, which gives each producer what it runs by.

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
    >>> LoaderOptions(worker_timeout_s=None).worker_timeout_s is None    # no watchdog
    True
    >>> LoaderOptions(read_options=None).read_options.num_threads is None    # the source's suggestion
    True
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal

from thresher._validate import check_count, check_int, is_seconds
from thresher.errors import ConfigError
from thresher.loader.read_options import ReadOptions

__all__ = ["WORKER_MODES", "LoaderOptions", "OptionAttributes", "WorkerCount", "WorkerMode"]

WorkerCount = int | Literal["auto"]
WorkerMode = Literal["process", "thread", "auto"]
"""How workers run: ``"process"``, ``"thread"``, or ``"auto"`` (chosen by ``worker_count="auto"``)."""
WORKER_MODES = ("process", "thread")

_MIN_CHUNK_RECORDS = 256

DEFAULT_WORKER_TIMEOUT_S = 300.0
"""A chunk normally takes well under a second; five minutes without one is a hang."""


@dataclass(frozen=True)
class LoaderOptions:
    """The DataLoader's speed and memory options, checked when made (ConfigError).

    None of them changes the batches: see ``DataLoader`` for what each one does.
    ``worker_timeout_s`` is the watchdog's limit: seconds a worker may keep one chunk
    before the loader raises WorkerStuckError (None: wait forever). ``read_options``: a
    ``ReadOptions`` or Grain's (coerced); ``warm_start``: first chunks computed in this
    process while worker processes start.
    """

    worker_count: WorkerCount = 0
    chunk_size: int | None = None
    worker_buffer_size: int | None = None
    worker_mode: WorkerMode | None = None
    worker_timeout_s: float | None = DEFAULT_WORKER_TIMEOUT_S
    read_options: ReadOptions = field(default_factory=ReadOptions)
    warm_start: bool = False

    def __post_init__(self) -> None:
        mode = self.worker_mode
        chosen = mode == "auto" and self.worker_count == "auto"  # as resolved below (a replace() passes it again)
        if mode is not None and not chosen and (not isinstance(mode, str) or mode not in WORKER_MODES):
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
        t = self.worker_timeout_s
        if t is not None and not is_seconds(t, finite=True):
            raise ConfigError(f"worker_timeout_s must be None or a number of seconds > 0, got {t!r}")
        object.__setattr__(self, "worker_timeout_s", None if t is None else float(t))
        object.__setattr__(self, "read_options", ReadOptions.coerce(self.read_options))
        object.__setattr__(self, "warm_start", bool(self.warm_start))

    def chunk_size_for(self, batch_size: int | None) -> int:
        """``chunk_size``, or by default a multiple of the batch size of at least 256."""
        if self.chunk_size is not None:
            return self.chunk_size
        unit = batch_size or 1
        return unit * max(1, -(-_MIN_CHUNK_RECORDS // unit))

    def resolved(self, batch_size: int | None) -> LoaderOptions:
        """These options with ``chunk_size`` set (``chunk_size_for``): what an Engine runs by.

        Example:
            >>> LoaderOptions().resolved(batch_size=100).chunk_size
            300
        """
        return replace(self, chunk_size=self.chunk_size_for(batch_size))


class OptionAttributes:
    """The options of a ``LoaderOptions`` held as ``self.options``, as read-only attributes
    (``DataLoader`` and ``Engine`` both show them; ``chunk_size`` resolved by the DataLoader).

    Example:
        >>> class Holder(OptionAttributes):
        ...     options = LoaderOptions(worker_count=2, chunk_size=64)
        >>> Holder().worker_count, Holder().worker_mode, Holder().chunk_size
        (2, 'process', 64)
    """

    options: LoaderOptions

    @property
    def worker_count(self) -> WorkerCount:
        """Workers that compute ahead (0: this process), or ``"auto"``."""
        return self.options.worker_count

    @property
    def worker_mode(self) -> WorkerMode:
        """``"process"``, ``"thread"``, or ``"auto"`` (``worker_count="auto"`` measures it)."""
        return self.options.worker_mode or "process"

    @property
    def chunk_size(self) -> int:
        """Positions per chunk."""
        size = self.options.chunk_size
        assert size is not None  # resolved by the DataLoader
        return size

    @property
    def worker_buffer_size(self) -> int | None:
        return self.options.worker_buffer_size

    @property
    def worker_timeout_s(self) -> float | None:
        return self.options.worker_timeout_s

    @property
    def read_options(self) -> ReadOptions:
        return self.options.read_options

    @property
    def warm_start(self) -> bool:
        """The first chunks of each iterator with worker processes come from this process
        while its workers start (thresher.loader.warm_start); the same batches."""
        return self.options.warm_start
