"""Split objects of other libraries (TFDS's ``ReadInstruction``, ``even_splits`` items).

Such an object is recognised by its ``to_absolute(split_infos)`` method, without
importing the library: it is asked to resolve itself against the dataset's split sizes
(objects with ``num_examples`` and ``shard_lengths``), and what it returns (objects
with ``splitname``/``split``, ``from_`` and ``to``) becomes thresher's
:class:`AbsoluteInstruction`. The ranges are therefore exactly the ones the other
library computes.

Example:
    >>> import dataclasses
    >>> from thresher.splits.foreign import ForeignSplit
    >>> @dataclasses.dataclass
    ... class Abs:
    ...     splitname: str
    ...     from_: int
    ...     to: int
    >>> class FirstHalf:  # quacks like a TFDS split object
    ...     def to_absolute(self, infos):
    ...         return [Abs("train", 0, infos["train"].num_examples // 2)]
    >>> [str(a) for a in ForeignSplit(FirstHalf()).to_absolute({"train": 10})]
    ['train[0:5]']
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from thresher.errors import SplitError
from thresher.splits.base import AbsoluteInstruction, AbstractSplit, SplitSizeLike, split_sizes

__all__ = ["ForeignSplit", "is_foreign_split"]


def is_foreign_split(obj: object) -> bool:
    """True for a split object of another library (it has ``to_absolute``)."""
    return not isinstance(obj, (str, AbstractSplit)) and callable(
        getattr(obj, "to_absolute", None))


class ForeignSplit(AbstractSplit):
    """Wraps another library's split object (see module doc)."""

    def __init__(self, split: Any) -> None:
        self.split = split

    def __repr__(self) -> str:
        return f"ForeignSplit({self.split!r})"

    def __str__(self) -> str:
        return repr(self.split)

    def to_absolute(self, split_infos: Mapping[str, SplitSizeLike]) -> list[AbsoluteInstruction]:
        sizes = split_sizes(split_infos)
        try:
            parts = list(self.split.to_absolute(sizes))
        except (ValueError, KeyError, IndexError, TypeError) as e:
            known = ", ".join(repr(k) for k in sizes)
            raise SplitError(f"split {self.split!r} cannot be resolved against this dataset "
                             f"(splits {known}): {e}") from None
        out = []
        for p in parts:
            name = getattr(p, "splitname", getattr(p, "split", None))
            lo, hi = getattr(p, "from_", None), getattr(p, "to", None)
            if name not in sizes or not all(v is None or isinstance(v, int) for v in (lo, hi)):
                raise SplitError(f"split {self.split!r} resolved to {p!r}, which is not a range "
                                 f"of a split of this dataset")
            n = sizes[name].num_examples
            lo = 0 if lo is None else min(max(lo, 0), n)  # None: from the start / to the end
            hi = n if hi is None else min(max(hi, lo), n)
            out.append(AbsoluteInstruction(name, lo, hi))
        return out
