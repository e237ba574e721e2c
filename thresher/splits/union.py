"""SplitUnion: ``a + b + ...``, the parts read one after the other (duplicates kept).

Example:
    >>> from thresher.splits import ReadInstruction
    >>> u = ReadInstruction("train", to=2) + "test"
    >>> u, [str(a) for a in u.to_absolute({"train": 5, "test": 3})]
    (SplitUnion('train[:2]+test'), ['train[0:2]', 'test[0:3]'])
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from thresher.splits.base import AbsoluteInstruction, AbstractSplit, SplitSizeLike

__all__ = ["SplitUnion"]


@dataclasses.dataclass(frozen=True)
class SplitUnion(AbstractSplit):
    """The concatenation of several splits, in order; made by ``+``."""

    parts: tuple[AbstractSplit, ...]

    @classmethod
    def of(cls, *splits: AbstractSplit) -> SplitUnion:
        """Joins splits, flattening nested unions."""
        parts: list[AbstractSplit] = []
        for s in splits:
            parts.extend(s.parts if isinstance(s, SplitUnion) else (s,))
        return cls(tuple(parts))

    def to_absolute(self, split_infos: Mapping[str, SplitSizeLike]) -> list[AbsoluteInstruction]:
        out: list[AbsoluteInstruction] = []
        for part in self.parts:
            out.extend(part.to_absolute(split_infos))
        return out

    def __str__(self) -> str:
        return "+".join(str(p) for p in self.parts)

    def __repr__(self) -> str:
        return f"SplitUnion({str(self)!r})"
