"""Grain's public names and signatures on thresher's engine: ``import thresher.grain as grain``.

A program written for Grain 0.2 (``import grain.python as grain`` or ``import
grain``) runs with that one line changed. thresher keeps its own behaviour where
Grain's is a bug: batches do not change with the worker count, a state restores
under any worker count, seeds are hashed with the epoch (never added). The order
for a given seed differs from Grain's. Names of Grain that thresher does not
provide raise an AttributeError saying what to use instead.

Example:
    >>> import thresher.grain as grain
    >>> loader = grain.DataLoader(
    ...     data_source=grain.RangeDataSource(0, 8, 1),
    ...     sampler=grain.IndexSampler(8, grain.NoSharding(), shuffle=True, num_epochs=1, seed=0),
    ...     operations=[grain.Batch(4)])
    >>> sorted(x for b in loader for x in b.tolist())
    [0, 1, 2, 3, 4, 5, 6, 7]
"""

from __future__ import annotations

import importlib
from typing import Any

from thresher.grain import samplers, sharding, sources, transforms
from thresher.grain.data_loader import DataLoader, DataLoaderIterator, PyGrainDatasetIterator
from thresher.grain.dataset import IterDataset, MapDataset
from thresher.grain.dataset_iterator import DatasetIterator
from thresher.grain.options import MultiprocessingOptions, ReadOptions
from thresher.grain.samplers import IndexSampler, Sampler, SequentialSampler
from thresher.grain.sharding import NoSharding, ShardByJaxProcess, ShardOptions
from thresher.grain.sources import (
    ArrayRecordDataSource,
    InMemoryDataSource,
    RandomAccessDataSource,
    RangeDataSource,
    SharedMemoryDataSource,
)
from thresher.grain.transforms import (
    Batch,
    FilterTransform,
    MapTransform,
    MapWithIndexTransform,
    RandomMapTransform,
    Transformation,
    Transformations,
)
from thresher.samplers.index_sampler import RecordMetadata

__all__ = [
    "DATASET_INDEX",
    "EPOCH",
    "INDEX",
    "META_FEATURES",
    "RECORD",
    "RECORD_KEY",
    "SEED",
    "ArrayRecordDataSource",
    "Batch",
    "DataLoader",
    "DataLoaderIterator",
    "DatasetIterator",
    "FilterTransform",
    "InMemoryDataSource",
    "IndexSampler",
    "IterDataset",
    "MapDataset",
    "MapTransform",
    "MapWithIndexTransform",
    "MultiprocessingOptions",
    "NoSharding",
    "PyGrainDatasetIterator",
    "RandomAccessDataSource",
    "RandomMapTransform",
    "RangeDataSource",
    "ReadOptions",
    "RecordMetadata",
    "Sampler",
    "SequentialSampler",
    "ShardByJaxProcess",
    "ShardOptions",
    "SharedMemoryDataSource",
    "Transformation",
    "Transformations",
    "samplers",
    "sharding",
    "sources",
    "transforms",
]  # and, imported on first use, PyGrainCheckpointHandler/Save/Restore, checkpoint, multiprocessing, python

# Grain's meta-feature names (grain.python.INDEX, ...): the keys Grain's own operations add to a record.
# thresher never adds them to your elements; the values are in RecordMetadata (index, epoch, record_key).
INDEX, EPOCH, RECORD_KEY, SEED, DATASET_INDEX, RECORD = (
    "_index", "_epoch", "_record_key", "_seed", "_dataset_index", "_record")
META_FEATURES = frozenset({INDEX, EPOCH, RECORD_KEY, SEED, DATASET_INDEX, RECORD})

_LAZY = {  # imported on first use: they need orbax-checkpoint
    "PyGrainCheckpointHandler": "thresher.grain.checkpoint",
    "PyGrainCheckpointSave": "thresher.grain.checkpoint",
    "PyGrainCheckpointRestore": "thresher.grain.checkpoint",
}
_MODULES = {"checkpoint": "thresher.grain.checkpoint", "multiprocessing": "thresher.grain.options",
            "python": "thresher.grain.python"}
_INSTEAD = {
    "load": "build a thresher.grain.DataLoader (or thresher.DataLoader) from a source, sampler and operations",
    "experimental": "thresher.Dataset has interleave, pack, cache and mixing; see docs/coming_from_grain.md",
    "SharedMemoryArray": "return NumPy arrays: thresher moves them from workers through shared memory itself",
    "Record": "operations receive the element itself; MapWithIndexTransform receives its position",
    "DatasetSelectionMap": "thresher.Dataset.mix(datasets, weights, period=..., seed=...)",
    "FlatMapTransform": "thresher.Dataset.pack for token streams; one element per record otherwise",
    "BatchOperation": "Batch(batch_size, drop_remainder)",
    "MapOperation": "MapTransform", "FilterOperation": "FilterTransform", "RandomMapOperation": "RandomMapTransform",
    "config": "thresher has no global flags: pass options to the DataLoader or Dataset",
    "Operation": "operations are transforms (MapTransform, RandomMapTransform, FilterTransform, Batch): a Grain "
                 "Operation that rewrites the record iterator cannot run position by position",
    "TfRandomMap": "RandomMapTransform (thresher passes a NumPy Generator; no TensorFlow op is run)",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY or name in _MODULES:
        # thresher.grain.checkpoint raises MissingExtraError (pip install "thresher[orbax]") without Orbax
        module = importlib.import_module(_LAZY.get(name) or _MODULES[name])
        return getattr(module, name) if name in _LAZY else module
    if name in _INSTEAD:
        raise AttributeError(f"Grain's {name} is not part of thresher.grain; the thresher way: {_INSTEAD[name]}")
    raise AttributeError(f"module 'thresher.grain' has no attribute {name!r}")
