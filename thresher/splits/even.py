"""even_splits and split_for_jax_process: n disjoint, equally sized sub-splits.

The sub-splits are lazy split objects, as in TFDS: sizes are only known once they are
resolved against a dataset (``thresher.data_source(path, split=subsplit)`` or
``info.splits[subsplit]``), so any split expression works, including unions and the
output of another ``even_splits``.

Each ``+`` part of the split is divided on its own, exactly as TFDS does: a part of m
records gives sub-split i the records ``[i*q + min(i, r), (i+1)*q + min(i+1, r))`` of
it, with ``q, r = divmod(m, n)`` (the first ``r`` sub-splits get one extra record), or
``[i*q, (i+1)*q)`` with ``drop_remainder=True``. Sub-split sizes therefore differ by
at most one per ``+`` part.

Example:
    >>> from thresher.splits import even_splits
    >>> subs = even_splits("train", 3)
    >>> [s.num_examples({"train": 11}) for s in subs]
    [4, 4, 3]
    >>> [str(a) for a in subs[1].to_absolute({"train": 11})]
    ['train[4:8]']
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from thresher._optional import require
from thresher._validate import check_count, is_int
from thresher.errors import ConfigError
from thresher.splits.base import AbsoluteInstruction, AbstractSplit, SplitArg, SplitSizeLike
from thresher.splits.parse import parse_split

__all__ = ["EvenSplit", "even_splits", "split_for_jax_process"]


@dataclasses.dataclass(frozen=True)
class EvenSplit(AbstractSplit):
    """Sub-split ``index`` of ``count`` equal parts of ``split`` (see :func:`even_splits`)."""

    split: AbstractSplit
    index: int
    count: int
    drop_remainder: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "split", parse_split(self.split))
        check_count(self.count, "even_splits: n", minimum=1)
        if not is_int(self.index, minimum=0, maximum=self.count - 1):
            raise ConfigError(
                f"even_splits: index must be in [0, {self.count}), got {self.index!r}"
            )

    def to_absolute(self, split_infos: Mapping[str, SplitSizeLike]) -> list[AbsoluteInstruction]:
        out = []
        for a in self.split.to_absolute(split_infos):
            q, r = divmod(a.num_examples, self.count)
            lo, hi = a.from_ + q * self.index, a.from_ + q * (self.index + 1)
            if not self.drop_remainder:
                lo += min(self.index, r)
                hi += min(self.index + 1, r)
            out.append(AbsoluteInstruction(a.split, lo, hi))
        return out

    def __str__(self) -> str:
        drop = ", drop_remainder=True" if self.drop_remainder else ""
        return f"even_splits({str(self.split)!r}, n={self.count}{drop})[{self.index}]"

    def __repr__(self) -> str:
        return f"EvenSplit({str(self)!r})"


def even_splits(split: SplitArg, n: int, drop_remainder: bool = False) -> list[EvenSplit]:
    """Divides ``split`` into ``n`` disjoint sub-splits of equal size (TFDS semantics).

    Args:
        split: any split expression (``"train"``, ``"train[75%:]+test"``, a
            ReadInstruction, an earlier ``even_splits`` result).
        n: the number of sub-splits.
        drop_remainder: drop the last ``m % n`` records of each ``+`` part so every
            sub-split has exactly the same size; otherwise the first sub-splits get
            one record more.

    Returns:
        ``n`` lazy split objects; pass one to ``thresher.data_source(path, split=...)``.

    Example:
        >>> from thresher.splits import even_splits
        >>> [s.num_examples({"train": 10}) for s in even_splits("train", 4, drop_remainder=True)]
        [2, 2, 2, 2]
    """
    parsed = parse_split(split)
    check_count(n, "even_splits: n", minimum=1)
    return [EvenSplit(parsed, i, n, bool(drop_remainder)) for i in range(n)]


def split_for_jax_process(
    split: SplitArg,
    drop_remainder: bool = False,
    *,
    process_index: int | None = None,
    process_count: int | None = None,
) -> EvenSplit:
    """The sub-split of ``split`` for this JAX process: ``even_splits(split,
    jax.process_count(), drop_remainder)[jax.process_index()]``.

    jax is imported only when ``process_index`` or ``process_count`` is not given.

    Example:
        >>> from thresher.splits import split_for_jax_process
        >>> sub = split_for_jax_process("train", process_index=1, process_count=2)
        >>> [str(a) for a in sub.to_absolute({"train": 5})]
        ['train[3:5]']
    """
    if process_index is None or process_count is None:
        jax = require("jax", "split_for_jax_process without process_index/process_count")
        process_index = jax.process_index() if process_index is None else process_index
        process_count = jax.process_count() if process_count is None else process_count
    subs = even_splits(split, process_count, drop_remainder)
    if not 0 <= process_index < process_count:
        raise ConfigError(
            f"split_for_jax_process: process_index {process_index} is not in "
            f"[0, {process_count})"
        )
    return subs[process_index]
