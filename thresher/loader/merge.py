"""``merge_states``: the states of all processes at a checkpoint, as one exact restart point.

With a Filter before the Batch (or ``errors="skip"``), processes advance through the
global stream at different speeds, so no single position describes a checkpoint. The
states of all P processes together do: every process's shard is consumed below its
own next global position. ``merge_states`` keeps exactly that, compactly
(``thresher.loader.exclusions.Consumed``): the watermark W (the slowest process's next
global position, below which everything is consumed) and, past it, one layer of P
positions. A restore of the merged state on P' processes starts every new shard at its
first position at or past W and leaves out the positions the layers mark consumed: each
element of the stream not delivered before the checkpoint is delivered exactly once, and
none twice. Layers of earlier host changes are kept while some of their positions lie
past the watermark, and dropped once it passes them.

Example:
    >>> import thresher as th
    >>> def loader(i, n):
    ...     sampler = th.IndexSampler(24, shard_options=th.ShardOptions(i, n))
    ...     keep = th.FilterTransform(lambda x: x % 4 != 1)
    ...     return th.DataLoader(th.sources.RangeDataSource(0, 24), sampler, [keep, th.Batch(2)])
    >>> its = [iter(loader(i, 2)) for i in range(2)]
    >>> first = [next(its[0]).tolist() for _ in range(2)] + [next(its[1]).tolist()]
    >>> first                                    # shard 0 is at global 8, shard 1 at 8 (7 was filtered)
    [[0, 2], [4, 6], [3, 7]]
    >>> merged = th.merge_states([it.get_state() for it in its])
    >>> rest = []
    >>> for i in range(3):                       # restart on 3 processes
    ...     it = iter(loader(i, 3))
    ...     it.set_state(merged)
    ...     rest += [x for b in it for x in b.tolist()]
    >>> sorted(x for b in first for x in b) + sorted(rest) == [x for x in range(24) if x % 4 != 1]
    True
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from thresher.errors import InvalidStateError
from thresher.loader.exclusions import MAX_LAYERS, Consumed, Layer
from thresher.loader.state import check_run
from thresher.loader.state_types import LoaderState

__all__ = ["merge_states"]


def merge_states(states: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One state from the states of all processes of a run, for an exact restore on any process count.

    Pass one ``get_state()`` per process (all shards, any order; gathered as for
    ``slowest_state``). Every process of the restoring run calls ``set_state`` with
    the merged state. The skipped steps and blocked records of the states are kept.

    Raises InvalidStateError if the states are not one run's complete set, or if
    the restart history has more than 64 host changes still in flight.
    """
    if not isinstance(states, Mapping) and any(
            (c := LoaderState.from_json(st).extensions.consumed) is not None and c.merged for st in states):
        raise InvalidStateError("merge_states got a state that is already merged; pass the states that the "
                                "processes' get_state() returned")
    seen = check_run(states, "merge_states")
    first = seen[0]
    for st in seen.values():
        if st.extensions != first.extensions:
            raise InvalidStateError(
                f"merge_states got states of one run whose extensions differ (shard 0: "
                f"{first.extensions.to_json()}, shard {st.geometry.shard_index}: {st.extensions.to_json()}): "
                "they were not saved at one checkpoint of one run")
    nexts = tuple(seen[i].next_global_position for i in range(len(seen)))
    old = first.extensions.consumed
    watermark = max(min(nexts), old.watermark if old is not None else 0)
    kept = tuple(x for x in (old.layers if old is not None else ()) if max(x.next) > watermark)
    layer = Layer(first.geometry.shard_count, first.geometry.block_size, nexts)
    if len(kept) + 1 > MAX_LAYERS:
        raise InvalidStateError(
            f"merge_states: {len(kept) + 1} host changes still have positions in flight past the watermark "
            f"(at most {MAX_LAYERS}); let the run progress between changes of the process count")
    consumed = Consumed(watermark, (*kept, layer), merged=True, parent=Consumed.digest(old))
    merged = replace(first, extensions=replace(first.extensions, consumed=consumed))
    return merged.to_json()
