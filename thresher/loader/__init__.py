"""The loader: DataLoader, its iterator and state, and the producers behind it.

Public: the names below. ``engine`` (the Engine an iterator runs on), ``state_types``
(the typed state), ``options`` and ``resumable`` (the iterator protocol) are stable
seams for code built on thresher. The other modules (``chunk``, ``producers/``,
``batcher``, ``autotune``, ``pool/``, ``profiling/``) are internal.

Example:
    >>> import thresher as th
    >>> len(th.DataLoader(th.sources.RangeDataSource(0, 10), th.IndexSampler(10), [th.Batch(3)]))
    4
"""

# The names are imported on first use (thresher._optional.lazy_names): a worker imports
# thresher.loader.pool.worker_main without the DataLoader, autotuning, tracing and merging.
from typing import TYPE_CHECKING

from thresher._optional import lazy_names

if TYPE_CHECKING:
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

__getattr__, __dir__ = lazy_names(__name__, {
    "AutotuneReport": "thresher.loader.autotune",
    "DataLoader": "thresher.loader.data_loader",
    "Engine": "thresher.loader.engine",
    "DataLoaderIterator": "thresher.loader.iterator",
    "merge_states": "thresher.loader.merge",
    "LoaderOptions": "thresher.loader.options",
    "preload_in_workers": "thresher.loader.pool.worker_start",
    "LoaderStats": "thresher.loader.profiling.stats",
    "StageTime": "thresher.loader.profiling.stats",
    "plot_timeline": "thresher.loader.profiling.timeline",
    "Tracer": "thresher.loader.profiling.tracing",
    "trace": "thresher.loader.profiling.tracing",
    "ReadOptions": "thresher.loader.read_options",
    "ResumableIterator": "thresher.loader.resumable",
    "slowest_state": "thresher.loader.state",
    "upgrade_state": "thresher.loader.state",
    "LoaderState": "thresher.loader.state_types",
    # the submodules `import thresher.loader` made attributes before its names became lazy
    **{name: f"thresher.loader.{name}" for name in (
        "autotune", "batcher", "bad_records", "chunk", "data_loader", "engine", "exclusions",
        "iterator", "ledger", "main_module", "merge", "options", "pool", "producers", "profiling",
        "read_ahead", "read_options", "resumable", "skips", "state", "state_digest", "state_input",
        "state_types", "steps", "thread_probe", "warm_start"
    )},
})

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
