"""The loader: DataLoader, its iterator and state, and the producers behind it.

Example:
    >>> import thresher as th
    >>> len(th.DataLoader(th.sources.RangeDataSource(0, 10), th.IndexSampler(10), [th.Batch(3)]))
    4
"""

from thresher.loader.autotune import AutotuneReport
from thresher.loader.data_loader import DataLoader
from thresher.loader.iterator import DataLoaderIterator
from thresher.loader.read_options import ReadOptions
from thresher.loader.state import slowest_state
from thresher.loader.profiling.stats import LoaderStats, StageTime
from thresher.loader.profiling.timeline import plot_timeline
from thresher.loader.profiling.tracing import Tracer, trace

__all__ = ["AutotuneReport", "DataLoader", "DataLoaderIterator", "LoaderStats", "ReadOptions", "StageTime", "Tracer",
           "plot_timeline", "slowest_state", "trace"]
