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
    >>> g.local_range(2, 0), g.global_batch
    ((8, 10), 4)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from thresher.errors import ConfigError
from thresher.loader.skips import SkipPlan, SkipRanges
from thresher.samplers.geometry import ShardGeometry

__all__ = ["StepGeometry", "data_dependent_reason", "skip_plan", "step_geometry", "steps_as_skips"]


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


@dataclass(frozen=True)
class StepGeometry:
    """The steps of every process of a pipeline whose steps are arithmetic.

    Example:
        >>> g = StepGeometry(batch_size=4, drop_last=True, shard_count=2, block_size=4,
        ...                  shard_drop_remainder=False, total=20)
        >>> g.local_range(2, 0), g.local_range(2, 1), g.num_steps(1), g.contiguous
        ((8, 12), None, 2, True)

    Attributes:
        batch_size: B, positions per step of one process (1 without a Batch).
        drop_last: a last partial batch is dropped (``Batch(drop_remainder=True)``).
        shard_count, block_size, shard_drop_remainder: how shards deal the stream.
        total: global positions in the stream (None: endless).
    """

    batch_size: int
    drop_last: bool
    shard_count: int
    block_size: int
    shard_drop_remainder: bool
    total: int | None

    def shard(self, process_index: int) -> ShardGeometry:
        """The geometry of process ``process_index``."""
        return ShardGeometry(process_index, self.shard_count, self.block_size)

    def local_length(self, process_index: int) -> int | None:
        """Positions in the stream of process ``process_index`` (None: endless)."""
        if self.total is None:
            return None
        return self.shard(process_index).local_length(self.total, self.shard_drop_remainder)

    def local_range(self, step: int, process_index: int) -> tuple[int, int] | None:
        """The local positions ``[start, stop)`` of step ``step`` of a process, or None if it has none."""
        b = self.batch_size
        start, stop = step * b, (step + 1) * b
        n = self.local_length(process_index)
        if n is not None:
            stop = min(stop, n)
            if stop <= start or (self.drop_last and stop - start < b):
                return None
        return start, stop

    def num_steps(self, process_index: int) -> int | None:
        """The number of steps of a process (None: endless)."""
        n = self.local_length(process_index)
        if n is None:
            return None
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    @property
    def contiguous(self) -> bool:
        """Step t of all processes together is global positions ``[t*G, (t+1)*G)``."""
        return self.shard_count == 1 or self.block_size == self.batch_size

    @property
    def global_batch(self) -> int:
        """G: global positions in one step of all processes."""
        return self.shard_count * self.batch_size


def step_geometry(loader: Any) -> StepGeometry:
    """The step arithmetic of a DataLoader; ConfigError when its steps depend on the data."""
    why = data_dependent_reason(loader)
    if why is not None:
        raise ConfigError(
            f"the records of a step of this pipeline cannot be computed from the step number: {why}. "
            "Write a ledger as the run goes (DataLoader(..., ledger=DIR)) and pass it: "
            f"explain(..., ledger=DIR) or thresher explain --ledger DIR ({list(loader.plan.descriptions)})")
    sampler = loader.sampler
    batch = loader.plan.batch
    return StepGeometry(batch.batch_size if batch is not None else 1,
                        bool(batch is not None and batch.drop_remainder), sampler.shard_count,
                        sampler.block_size, sampler.shard_options.drop_remainder, sampler.global_length)


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
            f"({geo.batch_size}), so a step is not one range of global positions. Leave "
            "ShardOptions.block_size unset (the DataLoader then deals blocks of one batch)")
    return skips.plan(geo.batch_size, geo.global_batch)


def steps_as_skips(processor: Any, steps: range) -> SkipRanges:
    """The global positions of ``steps`` of this pipeline, as skip ranges."""
    try:
        geo = step_geometry(processor)
    except ConfigError as e:
        raise ConfigError(f"cannot skip steps: {e}") from None
    return SkipRanges.of_steps(steps, geo.global_batch)
