"""Samplers: which record goes at which position of the stream.

Example:
    >>> import thresher as th
    >>> [th.IndexSampler(4)[p].record_key for p in range(4)]
    [0, 1, 2, 3]
"""

from thresher.randomness.permutation import Permutation
from thresher.samplers.block_shuffle import BlockShuffle
from thresher.samplers.index_sampler import IndexSampler, RecordMetadata
from thresher.samplers.sharding import NoSharding, ShardByJaxProcess, ShardOptions

__all__ = ["BlockShuffle", "IndexSampler", "NoSharding", "Permutation", "RecordMetadata", "ShardByJaxProcess",
           "ShardOptions"]
