"""thresher: a deterministic, exactly resumable data loader for JAX training.

Example:
    >>> import thresher as th
    >>> loader = th.DataLoader(th.sources.RangeDataSource(0, 8),
    ...                        th.IndexSampler(8, shuffle=True, seed=1),
    ...                        [th.Batch(4)])
    >>> sorted(x for b in loader for x in b.tolist())
    [0, 1, 2, 3, 4, 5, 6, 7]
"""

from thresher import errors, features, samplers, sources, splits, transforms
from thresher.dataset import Dataset
from thresher.loader import DataLoader, DataLoaderIterator, LoaderStats, ReadOptions, plot_timeline, trace
from thresher.samplers import (
    IndexSampler,
    NoSharding,
    RecordMetadata,
    ShardByJaxProcess,
    ShardOptions,
)
from thresher.sources.prepared import builder, data_source, prepare
from thresher.splits import ReadInstruction, even_splits, split_for_jax_process
from thresher.transforms import (
    Batch,
    FilterTransform,
    MapTransform,
    RandomMapTransform,
)

__version__ = "0.1.0"

__all__ = [
    "Batch",
    "DataLoader",
    "DataLoaderIterator",
    "Dataset",
    "FilterTransform",
    "IndexSampler",
    "LoaderStats",
    "MapTransform",
    "NoSharding",
    "RandomMapTransform",
    "ReadOptions",
    "ReadInstruction",
    "RecordMetadata",
    "ShardByJaxProcess",
    "ShardOptions",
    "builder",
    "data_source",
    "errors",
    "even_splits",
    "features",
    "plot_timeline",
    "prepare",
    "samplers",
    "sources",
    "split_for_jax_process",
    "splits",
    "trace",
    "transforms",
]
