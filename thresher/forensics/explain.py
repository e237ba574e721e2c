"""``explain``: which records made step t, computed from t alone (no record is read).

The stream is a pure function of position, so the provenance of any step, past or
future, at step 5 or at step 10**12, is arithmetic: the positions of the step on
each process, their global positions, epochs, record keys (the epoch's
permutation), the file and index of each record (when the source can tell, see
``thresher.sources.record_locations``) and the seed of each record's generators.
The cost is O(batch size x processes) per step.

Example:
    >>> import thresher as th
    >>> loader = th.DataLoader(th.sources.RangeDataSource(0, 100),
    ...                        th.IndexSampler(100, shuffle=True, seed=3, num_epochs=None), [th.Batch(4)])
    >>> p = th.explain(loader, 10**12)
    >>> p.epochs.tolist(), p.global_positions.tolist()[:2]
    ([40000000000, 40000000000, 40000000000, 40000000000], [4000000000000, 4000000000001])
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from thresher._validate import is_int
from thresher.errors import ConfigError, IncompatibleStateError
from thresher.forensics.explain_packed import explain_packed
from thresher.forensics.ledger_steps import steps_at
from thresher.forensics.provenance import PackedSegments, StepProvenance, provenance
from thresher.loader.skips import SkipRanges
from thresher.loader.state_types import LoaderState
from thresher.loader.steps import data_dependent_reason, step_geometry
from thresher.samplers.geometry import Geometry

__all__ = ["PackedSegments", "StepProvenance", "explain"]

_MAX_POSITION = 2**62
_MAX_LISTED = 2**26  # positions of one step explain lists (a step of a filtered run)


def _compiled(obj: Any) -> Any:
    """The compiled chain of a Dataset or its iterator; None for anything else."""
    compiled = getattr(obj, "compiled", None)  # a DatasetIterator
    if compiled is None and callable(getattr(obj, "compile", None)) and hasattr(obj, "nodes"):  # a Dataset
        compiled = obj.compile()
    return compiled


def _as_loader(obj: Any) -> Any:
    """A Dataset or its iterator as the DataLoader its chain compiles to; anything else as it is."""
    compiled = _compiled(obj)
    if compiled is None:
        return obj
    if compiled.rebatch is not None:
        raise ConfigError("explain follows a Dataset up to its batch; this one is rebatched after it, so its "
                          f"steps are not the engine's ({' | '.join(compiled.stages)})")
    source = compiled.loader.engine.processor.source
    if type(source).__module__.startswith("thresher.dataset"):
        raise ConfigError(
            f"this Dataset's last stage reads a {type(source).__name__} (a slice, mixture, interleave, repeat "
            "or cache of other datasets), whose keys are positions in that view, not records of a source; "
            "explain names records of Datasets that read a source directly (source -> shuffle/map/filter "
            "-> batch), or of a DataLoader")
    return compiled.loader


def _parts(obj: Any) -> tuple[Any, SkipRanges, SkipRanges]:
    """(processor, skips, blocked records) of a DataLoader, a DataLoaderIterator or a ChunkProcessor."""
    engine = getattr(obj, "engine", None)
    processor = engine.processor if engine is not None else obj
    if not (hasattr(processor, "sampler") and hasattr(processor, "plan")):
        raise ConfigError(f"explain needs a thresher DataLoader or its iterator, got {obj!r}")
    skips = getattr(obj, "skips", None)
    ex = getattr(processor, "exclusions", None)
    return (processor, skips if isinstance(skips, SkipRanges) else SkipRanges(),
            ex.records if ex is not None else SkipRanges())


def _state_extensions(engine: Any, state: Mapping[str, Any] | LoaderState) -> tuple[SkipRanges, SkipRanges]:
    saved = state if isinstance(state, LoaderState) else LoaderState.from_json(state)
    if engine is not None and saved.stream.fingerprint != engine.stream.fingerprint:
        raise IncompatibleStateError(
            f"this state is of another global stream than the pipeline (fingerprint {saved.fingerprint}, "
            f"pipeline {engine.stream.fingerprint}): explain it with the pipeline that saved it")
    return saved.extensions.skips, saved.extensions.skip_records


def explain(loader: Any, step: int, process_index: int | None = None, *,
            state: Mapping[str, Any] | LoaderState | None = None,
            ledger: str | os.PathLike[str] | None = None) -> StepProvenance:
    """Which records make step ``step`` (on every process, or on ``process_index``).

    Args:
        loader: a DataLoader (any process's: all share the global stream) or its iterator
            (whose skipped steps are then shown); or a Dataset (or its iterator) whose last
            stage reads a source directly, packed (``pack``) or not.
        step: the step number, counted as in the run without skips (the (step+1)-th batch).
        process_index: one process, or None for all ``shard_count`` processes (from a
            ledger: every process that delivered a batch at that step).
        state: a saved state of the run; its skipped steps and blocked records are shown.
        ledger: the run's ledger directory (``DataLoader(..., ledger=DIR)``, ``it.ledger(DIR)``).
            Needed when the pipeline's steps depend on the data (a Filter before the Batch,
            ``errors="skip"``): the positions each step consumed are read from it (``delivered``
            then says how many of them the Filter let through), in the geometry of the run
            segment that delivered it (restarts on other process counts included); and for a
            packed Dataset, whose segments it names (``segments``, see thresher.forensics.explain_packed).

    Raises ConfigError when the pipeline's steps depend on the data and no ledger is
    given, or when no process has step ``step`` (past the end).

    Example, a filtered run explained from its ledger:
        >>> import tempfile, thresher as th
        >>> d = tempfile.mkdtemp()
        >>> loader = th.DataLoader(th.sources.RangeDataSource(0, 20), th.IndexSampler(20),
        ...                        [th.FilterTransform(lambda x: x % 3 != 0), th.Batch(4)], ledger=d)
        >>> batches = [b.tolist() for b in loader]
        >>> p = explain(loader, 1, ledger=d)
        >>> p.record_keys.tolist(), p.delivered, batches[1]
        ([6, 7, 8, 9, 10, 11], 4, [7, 8, 10, 11])
    """
    compiled = _compiled(loader)
    if compiled is not None and compiled.front is not None:  # packed: rows of windows, from the ledger
        if not is_int(step, minimum=0, maximum=_MAX_POSITION):
            raise ConfigError(f"step must be an int in [0, 2**62], got {step!r}")
        return explain_packed(compiled, int(step), process_index, ledger)
    loader = _as_loader(loader)
    processor, skips, blocked = _parts(loader)
    engine = getattr(loader, "engine", None)
    if state is not None:
        more_skips, more_blocked = _state_extensions(engine, state)
        skips, blocked = skips.union(more_skips), blocked.union(more_blocked)
    if not is_int(step, minimum=0):
        raise ConfigError(f"step must be an int >= 0, got {step!r}")
    step = int(step)
    if ledger is not None and data_dependent_reason(processor) is not None:
        return _from_ledger(processor, engine, step, process_index, ledger, blocked)
    geo: Geometry = step_geometry(processor)
    if (step + 1) * geo.global_batch > _MAX_POSITION:
        raise ConfigError(f"step {step} lies past global position 2**62, the limit of thresher's 64-bit positions")
    procs = range(geo.shard_count) if process_index is None else [int(process_index)]
    if process_index is not None and not 0 <= int(process_index) < geo.shard_count:
        raise ConfigError(f"process_index must be in [0, {geo.shard_count}), got {process_index!r}")
    pieces: list[tuple[int, np.ndarray, np.ndarray]] = []
    for i in procs:
        shard = geo.shard(i)
        span = shard.step_range(step)
        if span is not None:
            local = np.arange(span[0], span[1], dtype=np.int64)
            pieces.append((i, local, shard.to_global_array(local)))
    if not pieces:
        raise ConfigError(f"step {step} is past the end of the stream: it has {geo.shard(procs[0]).num_steps()} steps "
                          f"on process {procs[0]} ({geo.total} global positions, batch size {geo.step_size})")
    G = geo.global_batch
    skipped = bool(skips) and skips.intersects(step * G, (step + 1) * G)
    return provenance(processor, step, skipped, pieces, blocked)


def _from_ledger(processor: Any, engine: Any, step: int, process_index: int | None,
                 directory: str | os.PathLike[str], blocked: SkipRanges) -> StepProvenance:
    """Step ``step`` of a run whose steps depend on the data, from the positions its ledger recorded.

    Each process's step is read in the shard geometry of the run segment that delivered
    it (restarts on another number of processes included), less the positions that
    segment left out as consumed before it.
    """
    pieces: list[tuple[int, np.ndarray, np.ndarray]] = []
    delivered = 0
    for i, stream, line in steps_at(directory, step, process_index, engine, packed=False):
        if line.stop - line.start > _MAX_LISTED:
            raise ConfigError(f"{stream.path}: step {step} of process {i} consumed {line.stop - line.start} "
                              f"positions, more than explain lists ({_MAX_LISTED})")
        local = np.arange(line.start, line.stop, dtype=np.int64)
        glob = stream.geometry.to_global_array(local)
        if stream.consumed is not None:  # left out by this segment: consumed before the host change
            kept = ~stream.consumed.contains(glob)
            local, glob = local[kept], glob[kept]
        pieces.append((i, local, glob))
        delivered += line.delivered
    return provenance(processor, step, False, pieces, blocked, delivered)
