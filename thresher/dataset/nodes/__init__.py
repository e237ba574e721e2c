"""The steps of a Dataset chain: one frozen node class per step, each compiling itself.

``base`` holds the contract (:class:`Node`); the node classes live by what they do:
``sources`` (where a chain starts), ``order`` (shuffle, repeat, slice), ``elements`` (map,
random_map, filter, map_batch), ``batching`` (batch, pack) and ``placement`` (shard,
prefetch, cache).

Example:
    >>> from thresher.dataset.nodes import Map, describe_chain
    >>> describe_chain((Map(at=1, fns=(abs,)),))
    ['map(abs)']
"""

from thresher.dataset.nodes.base import Node, SourceNode, describe_chain, fn_name
from thresher.dataset.nodes.batching import BatchNode, Pack
from thresher.dataset.nodes.elements import Filter, Map, MapBatch, RandomMap
from thresher.dataset.nodes.order import Repeat, Shuffle, Slice
from thresher.dataset.nodes.placement import Cache, Prefetch, Shard
from thresher.dataset.nodes.sources import Interleave, Mix, Source, component_view

SOURCE_NODES = (Source, Mix, Interleave)

__all__ = [
    "SOURCE_NODES",
    "BatchNode",
    "Cache",
    "Filter",
    "Interleave",
    "Map",
    "MapBatch",
    "Mix",
    "Node",
    "Pack",
    "Prefetch",
    "RandomMap",
    "Repeat",
    "Shard",
    "Shuffle",
    "Slice",
    "Source",
    "SourceNode",
    "component_view",
    "describe_chain",
    "fn_name",
]
