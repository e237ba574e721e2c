"""The abstract split, its absolute form, and the split sizes it resolves against.

A split expression (``"train[:75%]+test"``) is resolved in two steps: parsed into an
:class:`AbstractSplit` without knowing any sizes, then turned into a list of
:class:`AbsoluteInstruction` (one per ``+`` part) by ``to_absolute(split_infos)``.

Example:
    >>> from thresher.splits import ReadInstruction
    >>> ri = ReadInstruction.from_spec("train[:50%]+test[-2:]")
    >>> [(a.split, a.from_, a.to) for a in ri.to_absolute({"train": 10, "test": 5})]
    [('train', 0, 5), ('test', 3, 5)]
"""

from __future__ import annotations

import abc
import dataclasses
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from thresher.errors import SplitError

__all__ = [
    "ALL",
    "SPLIT_NAME_RE",
    "AbsoluteInstruction",
    "AbstractSplit",
    "SplitArg",
    "SplitSizes",
    "check_split_name",
    "split_sizes",
]

ALL = "all"
# Letters, digits, `_` and `-` (TFDS accepts `[\w-]+`; we keep to ASCII).
SPLIT_NAME_RE = re.compile(r"[A-Za-z0-9_-]+")

# What ``to_absolute`` accepts for one split: its size (one shard), its shard lengths,
# or any object with ``shard_lengths`` (a SplitInfo).
SplitSizeLike = int | Sequence[int] | Any


@dataclasses.dataclass(frozen=True)
class SplitSizes:
    """The shard lengths of one split; ``num_examples`` is their sum."""

    name: str
    shard_lengths: tuple[int, ...]

    @property
    def num_examples(self) -> int:
        return sum(self.shard_lengths)

    @property
    def num_shards(self) -> int:
        return len(self.shard_lengths)


def check_split_name(name: object, *, allow_all: bool = False) -> str:
    """Returns ``name`` if it is a valid split name, else raises SplitError.

    Example:
        >>> check_split_name("train_2")
        'train_2'
    """
    if not isinstance(name, str) or not SPLIT_NAME_RE.fullmatch(name):
        raise SplitError(
            f"invalid split name {name!r}: a split name is letters, digits, '_' and '-'"
        )
    if name == ALL and not allow_all:
        raise SplitError(
            "'all' cannot be the name of a split: in split strings it means the union of "
            "every split of the dataset. Rename the split"
        )
    return name


def split_sizes(split_infos: Mapping[str, SplitSizeLike]) -> dict[str, SplitSizes]:
    """Normalises ``{name: size | shard_lengths | SplitInfo}`` into ``{name: SplitSizes}``.

    A bare int is a split of that many examples in one shard.
    """
    out: dict[str, SplitSizes] = {}
    for name, value in split_infos.items():
        if isinstance(value, SplitSizes):
            out[name] = value
            continue
        lengths: Any = getattr(value, "shard_lengths", value)
        if isinstance(lengths, bool):
            raise SplitError(f"split {name!r}: size must be an int, got {value!r}")
        if isinstance(lengths, int) or hasattr(lengths, "__index__"):
            lengths = [int(lengths)]
        try:
            shard_lengths = tuple(int(x) for x in lengths)
        except TypeError:
            raise SplitError(
                f"split {name!r}: expected a size, a list of shard lengths or a SplitInfo, "
                f"got {value!r}"
            ) from None
        if any(x < 0 for x in shard_lengths):
            raise SplitError(f"split {name!r}: negative shard length in {shard_lengths}")
        out[name] = SplitSizes(name, shard_lengths)
    return out


@dataclasses.dataclass(frozen=True)
class AbsoluteInstruction:
    """Records ``[from_, to)`` of split ``split``, with ``0 <= from_ <= to <= num_examples``."""

    split: str
    from_: int
    to: int

    @property
    def num_examples(self) -> int:
        return self.to - self.from_

    def __str__(self) -> str:
        return f"{self.split}[{self.from_}:{self.to}]"


class AbstractSplit(abc.ABC):
    """A split expression that resolves to absolute record ranges once sizes are known.

    Splits add with ``+`` (to each other or to strings): the result reads the parts one
    after the other, duplicates included, as in TFDS.
    """

    @classmethod
    def from_spec(cls, spec: SplitArg) -> AbstractSplit:
        """Parses a split string (``"train[:75%]+test"``); a split object is returned as is.

        Example:
            >>> from thresher.splits import ReadInstruction
            >>> ReadInstruction.from_spec("train[10%:20%]")
            ReadInstruction('train[10%:20%]')
        """
        if _PARSERS:
            return _PARSERS[-1](spec)
        raise SplitError("no split parser is registered (import thresher.splits)")  # pragma: no cover

    @abc.abstractmethod
    def to_absolute(self, split_infos: Mapping[str, SplitSizeLike]) -> list[AbsoluteInstruction]:
        """The absolute ranges this split reads, one per ``+`` part, in order.

        ``split_infos`` maps each split name to its size, its shard lengths or a SplitInfo.
        """

    def num_examples(self, split_infos: Mapping[str, SplitSizeLike]) -> int:
        """How many records this split reads."""
        return sum(a.num_examples for a in self.to_absolute(split_infos))

    def __add__(self, other: SplitArg) -> AbstractSplit:
        if not isinstance(other, (str, AbstractSplit)):
            return NotImplemented
        return SplitUnion.of(self, AbstractSplit.from_spec(other))

    def __radd__(self, other: SplitArg) -> AbstractSplit:
        if not isinstance(other, str):
            return NotImplemented
        return SplitUnion.of(AbstractSplit.from_spec(other), self)


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


SplitArg = str | AbstractSplit

#: The split-string parser, registered by :mod:`thresher.splits.parse` when it is imported (always, by
#: ``thresher.splits``): the parser builds the split classes, so this module cannot import it.
_PARSERS: list[Callable[[Any], AbstractSplit]] = []


def register_parser(parse: Callable[[Any], AbstractSplit]) -> Callable[[Any], AbstractSplit]:
    """Registers ``parse`` as the parser of split strings (a decorator; the last one registered is used)."""
    _PARSERS.append(parse)
    return parse
