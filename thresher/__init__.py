"""thresher: a deterministic, exactly resumable data loader for JAX training.

Example:
    >>> import thresher as th
    >>> loader = th.DataLoader(th.sources.RangeDataSource(0, 8),
    ...                        th.IndexSampler(8, shuffle=True, seed=1),
    ...                        [th.Batch(4)])
    >>> sorted(x for b in loader for x in b.tolist())
    [0, 1, 2, 3, 4, 5, 6, 7]
"""

# The names below are imported on first use (PEP 562), not with the package: a worker
# process, the fork server and a script that needs only the loader import what they use
# (``import thresher.loader.pool.worker_main`` no longer imports Dataset chains, features,
# splits and every storage format). For type checkers and readers, the same names are
# imported under TYPE_CHECKING.
from typing import TYPE_CHECKING

from thresher._optional import lazy_names

if TYPE_CHECKING:
    from thresher import errors, features, samplers, sources, splits, transforms
    from thresher.dataset import Dataset
    from thresher.display import as_dataframe, show_examples
    from thresher.forensics import audit, explain
    from thresher.loader import (
        DataLoader,
        DataLoaderIterator,
        LoaderStats,
        ReadOptions,
        merge_states,
        plot_timeline,
        trace,
        upgrade_state,
    )
    from thresher.samplers import (
        BlockShuffle,
        IndexSampler,
        NoSharding,
        RecordMetadata,
        ShardByJaxProcess,
        ShardOptions,
    )
    from thresher.sources.directory import builder, data_source
    from thresher.sources.write.prepare import prepare
    from thresher.splits import ReadInstruction, even_splits, split_for_jax_process
    from thresher.transforms import (
        Batch,
        FilterTransform,
        MapTransform,
        MapWithIndexTransform,
        RandomMapTransform,
    )

__version__ = "0.1.0"

__getattr__, __dir__ = lazy_names(__name__, {
    # the subpackages `import thresher` made attributes before its names became lazy
    **{name: f"thresher.{name}" for name in ("dataset", "display", "errors", "features", "forensics", "loader",
                                             "randomness", "samplers", "sources", "splits", "transforms")},
    "Dataset": "thresher.dataset",
    "as_dataframe": "thresher.display",
    "show_examples": "thresher.display",
    "audit": "thresher.forensics",
    "explain": "thresher.forensics",
    **dict.fromkeys(("DataLoader", "DataLoaderIterator", "LoaderStats", "ReadOptions", "merge_states",
                     "plot_timeline", "trace", "upgrade_state"), "thresher.loader"),
    **dict.fromkeys(("BlockShuffle", "IndexSampler", "NoSharding", "RecordMetadata", "ShardByJaxProcess",
                     "ShardOptions"), "thresher.samplers"),
    "builder": "thresher.sources.directory",
    "data_source": "thresher.sources.directory",
    "prepare": "thresher.sources.write.prepare",
    **dict.fromkeys(("ReadInstruction", "even_splits", "split_for_jax_process"), "thresher.splits"),
    **dict.fromkeys(("Batch", "FilterTransform", "MapTransform", "MapWithIndexTransform", "RandomMapTransform"),
                    "thresher.transforms"),
})

__all__ = [
    "Batch",
    "BlockShuffle",
    "DataLoader",
    "DataLoaderIterator",
    "Dataset",
    "FilterTransform",
    "IndexSampler",
    "LoaderStats",
    "MapTransform",
    "MapWithIndexTransform",
    "NoSharding",
    "RandomMapTransform",
    "ReadInstruction",
    "ReadOptions",
    "RecordMetadata",
    "ShardByJaxProcess",
    "ShardOptions",
    "as_dataframe",
    "audit",
    "builder",
    "data_source",
    "errors",
    "even_splits",
    "explain",
    "features",
    "merge_states",
    "plot_timeline",
    "prepare",
    "samplers",
    "show_examples",
    "sources",
    "split_for_jax_process",
    "splits",
    "trace",
    "transforms",
    "upgrade_state",
]
