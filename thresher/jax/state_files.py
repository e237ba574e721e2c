"""One JSON state file per process, and choosing which one(s) a restore reads.

A checkpoint holds ``process_{i}-of-{P}.json`` for each process i of the P that
saved it. A restore by process j of P' processes:

1. reads its own file when P' == P, else the file of ``min(j, P - 1)``: the states of
   an aligned run all record the same global position, so any one is enough;
2. lets ``set_state`` restore it exactly or refuse (GeometryError);
3. after a refusal, when no single state describes the run (a Filter before the
   Batch, ``errors="skip"``, or a run already restarted from merged states): reads all
   P files and restores their merge (:func:`thresher.merge_states`), which delivers
   every element not delivered before the checkpoint exactly once ("exact-merged");
4. otherwise only with ``allow_approximate=True``: restarts at the saved global
   position rounded down to a whole number of new global batches.

Every process decides alike, since each decision depends only on the files and the
new geometry, which all processes share.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from typing import Any

from thresher.errors import GeometryError, InvalidStateError
from thresher.loader.merge import merge_states
from thresher.loader.state import slowest_state
from thresher.loader.state_types import LoaderState

__all__ = ["parse_state_filenames", "restore_from_states", "state_filename"]

_NAME = re.compile(r"^process_(\d+)-of-(\d+)\.json$")


def state_filename(process_index: int, process_count: int) -> str:
    """The file name of one process's state.

    Example:
        >>> from thresher.jax.state_files import state_filename
        >>> state_filename(1, 4)
        'process_1-of-4.json'
    """
    return f"process_{process_index}-of-{process_count}.json"


def parse_state_filenames(names: Iterable[str], where: str = "the checkpoint") -> int:
    """Checks that ``names`` hold the state files of one run and returns its process count.

    Raises InvalidStateError when there are none, when they name different process
    counts, or when some process's file is missing.

    Example:
        >>> from thresher.jax.state_files import parse_state_filenames
        >>> parse_state_filenames(["process_0-of-2.json", "process_1-of-2.json", "other.txt"])
        2
    """
    found: dict[int, set[int]] = {}
    for name in names:
        m = _NAME.match(name)
        if m:
            found.setdefault(int(m.group(2)), set()).add(int(m.group(1)))
    if not found:
        raise InvalidStateError(f"{where} holds no thresher state file (process_<i>-of-<P>.json)")
    if len(found) > 1:
        raise InvalidStateError(f"{where} mixes state files of runs with {sorted(found)} processes")
    (count, indices), = found.items()
    missing = sorted(set(range(count)) - indices)
    if missing:
        raise InvalidStateError(f"{where} lacks the state files of processes {missing[:8]} of {count}: "
                                "the checkpoint is incomplete")
    return count


def load_state_text(text: str, where: str) -> dict[str, Any]:
    try:
        state = json.loads(text)
    except json.JSONDecodeError as e:
        raise InvalidStateError(f"{where} is not valid JSON: {e}") from e
    if not isinstance(state, dict):
        raise InvalidStateError(f"{where} does not hold a state dict")
    return state


def restore_from_states(iterator: Any, read: Callable[[int], dict[str, Any]], saved_count: int,
                        process_index: int, process_count: int, *, allow_approximate: bool = False,
                        operations_changed: bool = False) -> str:
    """Restores ``iterator`` from a run's per-process states; returns how ("exact", ...).

    ``read(i)`` returns the state saved by process i of ``saved_count``. See the
    module docstring for the rule. Returns "exact", "exact-merged" (every process
    restored from the merge of all saved states: each element not yet delivered is
    delivered once), "approximate" (rounded down to a whole new global batch) or
    "approximate-slowest" (restarted at the slowest saving process: only where a
    merged restore is refused).

    Example:
        >>> import thresher as th
        >>> from thresher.jax.state_files import restore_from_states
        >>> def loader(i, n, b):
        ...     sampler = th.IndexSampler(32, shard_options=th.ShardOptions(i, n))
        ...     return th.DataLoader(th.sources.RangeDataSource(0, 32), sampler, [th.Batch(b)])
        >>> old = [iter(loader(i, 2, 4)) for i in range(2)]      # 2 processes, global batch 8
        >>> _ = [next(it) for it in old for _ in range(2)]      # two steps: global position 16
        >>> saved = [it.get_state() for it in old]
        >>> new = iter(loader(3, 4, 2))                          # process 3 of 4, global batch 8
        >>> restore_from_states(new, saved.__getitem__, 2, 3, 4), next(new).tolist()
        ('exact', [22, 23])
    """
    changed = {"operations_changed": True} if operations_changed else {}  # set_state(..., operations_changed)
    own = read(process_index) if saved_count == process_count else read(min(process_index, saved_count - 1))
    try:
        iterator.set_state(own, **changed)
        return "exact"
    except GeometryError:
        saved = LoaderState.from_json(own)
        if not saved.geometry.aligned or saved.extensions.consumed is not None:
            iterator.set_state(merge_states([read(i) for i in range(saved_count)]), **changed)
            return "exact-merged"
        if not allow_approximate:
            raise
    try:
        iterator.set_state(own, allow_approximate=True, **changed)
        return "approximate"
    except GeometryError:
        pass
    merged = slowest_state([read(i) for i in range(saved_count)])
    iterator.set_state(merged, allow_approximate=True, **changed)
    return "approximate-slowest"
