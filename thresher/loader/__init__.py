"""The loader: DataLoader, its iterator and state, and the producers behind it.

Public: the names below. ``engine`` (the Engine an iterator runs on), ``state_types``
(the typed state), ``options`` and ``resumable`` (the iterator protocol) are stable
seams for code built on thresher. The other modules (``chunk``, ``producer``,
``batcher``, ``autotune``, ``pool/``, ``profiling/``) are internal.

Example:
    >>> import thresher as th
    >>> len(th.DataLoader(th.sources.RangeDataSource(0, 10), th.IndexSampler(10), [th.Batch(3)]))
    4
"""

from thresher.loader.autotune import AutotuneReport
from thresher.loader.data_loader import DataLoader
from thresher.loader.engine import Engine
from thresher.loader.iterator import DataLoaderIterator
from thresher.loader.merge import merge_states
from thresher.loader.options import LoaderOptions
from thresher.loader.pool.worker_start import preload_in_workers
from thresher.loader.profiling.stats import LoaderStats, StageTime
from thresher.loader.profiling.timeline import plot_timeline
from thresher.loader.profiling.tracing import Tracer, trace
from thresher.loader.read_options import ReadOptions
from thresher.loader.resumable import ResumableIterator
from thresher.loader.state import slowest_state, upgrade_state
from thresher.loader.state_types import LoaderState

__all__ = [
    "AutotuneReport",
    "DataLoader",
    "DataLoaderIterator",
    "Engine",
    "LoaderOptions",
    "LoaderState",
    "LoaderStats",
    "ReadOptions",
    "ResumableIterator",
    "StageTime",
    "Tracer",
    "merge_states",
    "plot_timeline",
    "preload_in_workers",
    "slowest_state",
    "trace",
    "upgrade_state",
]
