"""Dataset: tf.data/Grain-style chains (shuffle, map, filter, batch, mix, pack, ...) over the engine.

Example:
    >>> import thresher as th
    >>> [b.tolist() for b in th.Dataset.range(5).map(lambda x: x + 1).batch(2)]
    [[1, 2], [3, 4], [5]]
"""

from thresher.dataset.dataset import Dataset
from thresher.dataset.iterator import DatasetIterator, PackIterator
from thresher.dataset.optimize import identity
from thresher.dataset.packing import PackingStats

__all__ = ["Dataset", "DatasetIterator", "PackIterator", "PackingStats", "identity"]
