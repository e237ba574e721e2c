"""Batches of batches of a filtered stream, formed after the engine.

``ds.filter(p).batch(2).batch(3)``: the inner batches are batches of the filtered
stream, so batch i is not a function of position i and cannot be read by random
access. The engine iterates the inner batches; ``rebatch_iterator.RebatchIterator`` stacks every
``batch_size`` consecutive ones into an outer batch (as Grain's
``IterDataset.batch`` does), then runs the maps written after it.

State: an outer batch always takes whole inner batches, so after each outer batch
the engine's own state (its position) is the exact place to continue from; the
state is the engine's, unchanged, and restoring it resumes exactly.

Example:
    >>> import thresher as th
    >>> ds = th.Dataset.range(12).filter(lambda x: x % 3).batch(2, drop_remainder=True).batch(2)
    >>> [b.tolist() for b in ds]
    [[[1, 2], [4, 5]], [[7, 8], [10, 11]]]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from thresher.dataset.nodes.base import fn_name
from thresher.errors import ConfigError, TransformError
from thresher.transforms import Batch

__all__ = ["RebatchFront", "run_batch_maps"]


@dataclass
class RebatchFront:
    """What runs after the engine: an outer Batch and the maps after it."""

    batch: Batch
    fns: list[Callable[[Any], Any]] = field(default_factory=list)

    @staticmethod
    def of(batch_size: int, drop_remainder: bool, pad_to: Any, at: str) -> RebatchFront:
        """The front of a batch (written ``at``) of a filtered stream's batches."""
        if pad_to is not None:
            raise ConfigError(f"{at}: batches of a filtered stream's batches cannot be padded; pad the inner batch")
        return RebatchFront(Batch(batch_size, drop_remainder))

    def add_batch(self, batch_size: int, drop_remainder: bool, pad_to: Any, at: str) -> None:
        raise self.refuse(at)

    def add_maps(self, fns: Sequence[Callable[[Any], Any]], at: str) -> None:
        """Takes the maps written after the outer batch."""
        self.fns.extend(fns)

    def refuse(self, at: str) -> ConfigError:
        return ConfigError(f"{at}: after a batch of a filtered stream's batches, thresher supports map() and "
                           "map_batch(); put other steps before the second batch")

    def describe(self) -> str:
        return repr(self.batch) + "".join(f" -> map({fn_name(f)})" for f in self.fns)


def run_batch_maps(fns: list[Callable[[Any], Any]], batch: Any, where: str) -> Any:
    """Applies the maps that run after the engine (``where`` names them in a TransformError).

    Example:
        >>> from thresher.dataset.rebatch import run_batch_maps
        >>> run_batch_maps([abs, str], -3, "map on outer batches")
        '3'
    """
    for fn in fns:
        try:
            batch = fn(batch)
        except Exception as e:
            raise TransformError(f"{where} ({fn_name(fn)}) failed: {type(e).__name__}: {e}") from e
    return batch
