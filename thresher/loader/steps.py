"""Which positions make step t: the arithmetic, for pipelines where it is arithmetic.

Step t of a process is its (t+1)-th batch (its (t+1)-th element without a Batch),
counted in the run without skips. When nothing before or after the Batch can drop
elements, step t of process i is its local positions ``[t*B, (t+1)*B)`` (B the batch
size, 1 without a Batch), so where it comes from is a function of t alone. With a
Filter, or with ``errors="skip"``, the number of positions a step consumes depends
on the data: :func:`step_geometry` says so, naming why.

Example:
    >>> import thresher as th
    >>> from thresher.loader.steps import step_geometry
    >>> loader = th.DataLoader(th.sources.RangeDataSource(0, 10), th.IndexSampler(10), [th.Batch(4)])
    >>> g = step_geometry(loader)
    >>> g.step_range(2), g.global_batch
    ((8, 10), 4)
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from thresher.errors import ConfigError
from thresher.loader.skips import SkipPlan, SkipRanges
from thresher.samplers.geometry import Geometry

__all__ = ["data_dependent_reason", "skip_plan", "step_geometry", "steps_as_skips"]


def data_dependent_reason(loader: Any) -> str | None:
    """Why the positions of a step depend on the data (None when they do not)."""
    plan = loader.plan
    if plan.drops_records:
        return "errors='skip' drops records that fail, so a batch holds a data-dependent number of positions"
    if plan.filter_before_batch:
        return "a Filter comes before the Batch, so a batch holds a data-dependent number of positions"
    if plan.filters_batches:
        return "a Filter after the Batch drops whole batches, so step numbers depend on the data"
    return None


def step_geometry(loader: Any) -> Geometry:
    """The geometry of a DataLoader's process, with its step arithmetic (``Geometry.step_range``
    and the rest: the Batch's ``drop_last`` and the stream's ``total`` set); ConfigError when its
    steps depend on the data."""
    why = data_dependent_reason(loader)
    if why is not None:
        raise ConfigError(
            f"the records of a step of this pipeline cannot be computed from the step number: {why}. "
            "Write a ledger as the run goes (DataLoader(..., ledger=DIR)) and pass it: "
            f"explain(..., ledger=DIR) or thresher explain --ledger DIR ({list(loader.plan.descriptions)})")
    sampler = loader.sampler
    batch = loader.plan.batch
    geometry: Geometry = sampler.geometry
    batch_size = batch.batch_size if batch is not None else None
    contiguous = geometry.shard_count == 1 or geometry.block_size == (batch_size or 1)
    return replace(geometry, batch_size=batch_size, aligned=batch is not None and contiguous,
                   drop_last=bool(batch is not None and batch.drop_remainder), total=sampler.global_length)


def skip_plan(processor: Any, skips: SkipRanges) -> SkipPlan | None:
    """The jumps of a process of this pipeline over ``skips`` (None when there are none).

    Example:
        >>> import thresher as th
        >>> loader = th.DataLoader(th.sources.RangeDataSource(0, 40), th.IndexSampler(40), [th.Batch(4)])
        >>> skip_plan(loader, steps_as_skips(loader, range(2, 4))).resume_at(8)
        16

    Raises ConfigError when the pipeline's steps are not global position ranges (steps
    that depend on the data, or blocks that are not batches on several processes).
    """
    if not skips:
        return None
    try:
        geo = step_geometry(processor)
    except ConfigError as e:
        raise ConfigError(f"cannot skip steps: {e}") from None
    if not geo.contiguous:
        raise ConfigError(
            f"cannot skip steps: the shards' block size ({geo.block_size}) is not the batch size "
            f"({geo.step_size}), so a step is not one range of global positions. Leave "
            "ShardOptions.block_size unset (the DataLoader then deals blocks of one batch)")
    return skips.plan(geo.step_size, geo.global_batch)


def steps_as_skips(processor: Any, steps: range) -> SkipRanges:
    """The global positions of ``steps`` of this pipeline, as skip ranges."""
    try:
        geo = step_geometry(processor)
    except ConfigError as e:
        raise ConfigError(f"cannot skip steps: {e}") from None
    return SkipRanges.of_steps(steps, geo.global_batch)
