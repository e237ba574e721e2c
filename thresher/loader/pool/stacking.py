"""Workers stack whole batches: when they may, and how (shared by process and thread workers).

When the pipeline has a Batch, no Filter before it, and chunks that are a whole
number of batches, a worker stacks the chunk's batches itself: they are exactly the
batches the main process's Batcher would form, and the main process only hands
them out.

Example:
    >>> import thresher as th
    >>> from thresher.loader.pool.stacking import stacks
    >>> from thresher.transforms import plan_operations
    >>> stacks(plan_operations([th.Batch(4)]), 256), stacks(plan_operations([th.Batch(5)]), 256)
    (True, False)
"""

from __future__ import annotations

from thresher.errors import BatchError
from thresher.loader.chunk import Chunk, ChunkProcessor
from thresher.loader.profiling.stats import BATCH, PACK
from thresher.transforms.operations import Plan

__all__ = ["stack_batches", "stacks", "worker_stages"]


def stacks(plan: Plan, chunk_size: int, *, excluded: bool = False) -> bool:
    """Whether workers stack batches: a Batch, no Filter before it, whole batches per chunk, and
    no blocked records (``excluded``: those batches are formed in the main process)."""
    batch = plan.batch
    return (batch is not None and not plan.filter_before_batch and not excluded
            and chunk_size % batch.batch_size == 0)


def worker_stages(processor_stages: tuple[str, ...], stack: bool, pack: bool = True) -> tuple[str, ...]:
    """The stages a worker times: the processor's, ``batch`` when it stacks, ``pack`` (processes)."""
    return processor_stages + ((BATCH,) if stack else ()) + ((PACK,) if pack else ())


def stack_batches(processor: ChunkProcessor, chunk: Chunk) -> Chunk:
    """The chunk with its elements stacked into batches, exactly as the main Batcher would."""
    batch = processor.plan.batch
    assert batch is not None
    b = batch.batch_size
    elements, positions = chunk.elements, chunk.positions
    n = len(elements)
    bounds = [(i, min(i + b, n)) for i in range(0, n, b)]
    if n % b and batch.drop_remainder:
        bounds.pop()  # the last, partial batch: only the stream's last chunk has one
    try:
        batches = [batch.stack(elements[i:j], positions[i:j]) for i, j in bounds]
    except BatchError:
        return chunk  # let the main Batcher raise it, at exactly the batch worker_count=0 would
    return Chunk(chunk.start, chunk.stop, chunk.positions, [], batches)
