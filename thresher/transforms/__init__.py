"""Transforms: per-record maps, random maps, filters, and Batch.

Example:
    >>> import thresher as th
    >>> ops = [lambda x: x * 2, th.FilterTransform(lambda x: x > 2), th.Batch(2)]
    >>> loader = th.DataLoader(th.sources.RangeDataSource(0, 5), th.IndexSampler(5), ops)
    >>> [b.tolist() for b in loader]
    [[4, 6], [8]]
"""

from thresher.transforms.batch import Batch, stack
from thresher.transforms.filter import FilterTransform
from thresher.transforms.map import MapTransform
from thresher.transforms.map_with_index import MapWithIndexTransform
from thresher.transforms.operations import Operation, Plan, describe, plan_operations
from thresher.transforms.random_map import RandomMapTransform

__all__ = [
    "Batch",
    "FilterTransform",
    "MapTransform",
    "MapWithIndexTransform",
    "Operation",
    "Plan",
    "RandomMapTransform",
    "describe",
    "plan_operations",
    "stack",
]
