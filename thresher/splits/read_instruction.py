"""ReadInstruction: one split, optionally sliced, with TFDS's exact resolution rules.

Resolution of ``split[from:to]`` against a split of ``n`` records and shard lengths
``s`` (``len(s)`` shards), as TFDS does it:

- ``unit='abs'``: bounds are record indices; negative ones count from the end; a bound
  with ``abs(bound) > n`` is an error (unlike Python slicing).
- ``unit='%'``: bounds are percents in ``[-100, 100]`` (fractions allowed).
  ``rounding='closest'`` maps ``p`` to ``round(p * n / 100)`` (Python's round, half to
  even), which spreads the remainder over the percents; ``rounding='pct1_dropremainder'``
  maps it to ``p * (n // 100)``, so every 1% has the same size (``len(5%) == 5 *
  len(1%)``) and the last ``n % 100`` records are never read; it needs ``n >= 100``.
- ``unit='shard'``: bounds are shard indices in ``[-len(s), len(s)]``; ``train[k shard]``
  is the k-th shard.

A slice whose start is past its end reads nothing.

Example:
    >>> from thresher.splits import ReadInstruction
    >>> ri = ReadInstruction("train", from_=25, to=75, unit="%")
    >>> ri, ri.to_absolute({"train": 10})
    (ReadInstruction('train[25%:75%]'), [AbsoluteInstruction(split='train', from_=2, to=8)])
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Mapping

from thresher.errors import SplitError
from thresher.splits.base import (
    ALL,
    AbsoluteInstruction,
    AbstractSplit,
    SplitSizeLike,
    SplitSizes,
    check_split_name,
    split_sizes,
)

__all__ = ["ROUNDINGS", "UNITS", "ReadInstruction", "format_bound"]

UNITS = ("abs", "%", "shard")
ROUNDINGS = ("closest", "pct1_dropremainder")

Bound = int | float | None


def format_bound(value: int | float) -> str:
    """Writes a slice bound the way the parser reads it back (``10``, ``-2``, ``1.5``)."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return repr(value) if isinstance(value, float) else str(value)


def _check_bound(value: object, unit: str, which: str, split: str) -> Bound:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise SplitError(f"ReadInstruction({split!r}): {which} must be a number, got {value!r}")
    if unit == "%":
        v = float(value) if not isinstance(value, numbers.Integral) else int(value)
        if not math.isfinite(v) or abs(v) > 100:
            raise SplitError(
                f"percent bound {value!r}% is outside [-100%, 100%] (in ReadInstruction "
                f"for split {split!r})"
            )
        return v
    if not isinstance(value, numbers.Integral):
        raise SplitError(
            f"ReadInstruction({split!r}): {which}={value!r} must be an integer with "
            f"unit={unit!r} (only percents can be fractional)"
        )
    return int(value)


@dataclasses.dataclass(frozen=True)
class ReadInstruction(AbstractSplit):
    """One split, optionally sliced: the building block of split expressions.

    Args:
        split_name: the split to read (``"train"``). ``"all"`` (unsliced) is every split.
        from_: first bound (included), or None for the start.
        to: last bound (excluded), or None for the end.
        unit: ``'abs'`` (record indices), ``'%'`` (percents of the split) or ``'shard'``.
        rounding: for percents, ``'closest'`` or ``'pct1_dropremainder'`` (see module doc).

    Example:
        >>> from thresher.splits import ReadInstruction
        >>> ri = ReadInstruction("test", to=10, unit="%") + "train[-5:]"
        >>> str(ri), ri.num_examples({"train": 100, "test": 50})
        ('test[:10%]+train[-5:]', 10)
    """

    split_name: str
    from_: Bound = None
    to: Bound = None
    unit: str = "abs"
    rounding: str = "closest"

    def __post_init__(self) -> None:
        check_split_name(self.split_name, allow_all=True)
        if self.unit not in UNITS:
            raise SplitError(f"ReadInstruction unit must be one of {UNITS}, got {self.unit!r}")
        if self.rounding not in ROUNDINGS:
            raise SplitError(
                f"ReadInstruction rounding must be one of {ROUNDINGS}, got {self.rounding!r}"
            )
        object.__setattr__(self, "from_", _check_bound(self.from_, self.unit, "from_",
                                                       self.split_name))
        object.__setattr__(self, "to", _check_bound(self.to, self.unit, "to", self.split_name))
        if self.split_name == ALL and (self.from_ is not None or self.to is not None):
            raise SplitError(
                f"{str(self)!r}: 'all' (the union of every split) cannot be sliced; "
                "slice each split instead, e.g. 'train[:50%]+test[:50%]'"
            )

    def __str__(self) -> str:
        unit = "" if self.unit == "abs" else self.unit
        if self.from_ is None and self.to is None:
            text = self.split_name
        elif self.unit == "shard" and self.from_ is not None and (
            (self.from_ >= 0 and self.to == self.from_ + 1)
            or (self.from_ == -1 and self.to is None)
        ):
            text = f"{self.split_name}[{format_bound(self.from_)}shard]"
        else:
            lo = "" if self.from_ is None else format_bound(self.from_) + unit
            hi = "" if self.to is None else format_bound(self.to) + unit
            text = f"{self.split_name}[{lo}:{hi}]"
        if self.rounding != "closest":
            text += f"({self.rounding})"
        return text

    def __repr__(self) -> str:
        text = str(self)
        if self.rounding != "closest":
            text = text[: -len(self.rounding) - 2]
            return f"ReadInstruction({text!r}, rounding={self.rounding!r})"
        return f"ReadInstruction({text!r})"

    def to_absolute(self, split_infos: Mapping[str, SplitSizeLike]) -> list[AbsoluteInstruction]:
        sizes = split_sizes(split_infos)
        if self.split_name == ALL:
            if ALL in sizes:
                raise SplitError(
                    "the dataset has a split named 'all', which split strings reserve for "
                    "the union of every split; rename that split"
                )
            return [self._resolve(s) for s in sizes.values()]
        info = sizes.get(self.split_name)
        if info is None:
            known = ", ".join(repr(k) for k in sizes) or "none"
            raise SplitError(
                f"{str(self)!r}: unknown split {self.split_name!r}; the dataset has {known}"
                + (" (and 'all', their union)" if sizes else "")
            )
        return [self._resolve(info)]

    def _resolve(self, info: SplitSizes) -> AbsoluteInstruction:
        n = info.num_examples
        if self.unit == "%":
            lo = 0 if self.from_ is None else self._pct(self.from_, n)
            hi = n if self.to is None else self._pct(self.to, n)
        elif self.unit == "shard":
            lo = 0 if self.from_ is None else self._shard(int(self.from_), info)
            hi = n if self.to is None else self._shard(int(self.to), info)
        else:
            lo = 0 if self.from_ is None else self._index(int(self.from_), n)
            hi = n if self.to is None else self._index(int(self.to), n)
        return AbsoluteInstruction(info.name, lo, max(lo, hi))

    def _index(self, i: int, n: int) -> int:
        if abs(i) > n:
            raise SplitError(
                f"{str(self)!r}: index {i} is out of range: split {self.split_name!r} has "
                f"{n} examples (absolute bounds must be in [-{n}, {n}])"
            )
        return n + i if i < 0 else i

    def _pct(self, p: int | float, n: int) -> int:
        if self.rounding == "closest":
            i = round(p * n / 100.0)
        else:
            if n < 100:
                raise SplitError(
                    f"{str(self)!r}: 'pct1_dropremainder' rounding needs a split of at least "
                    f"100 examples, and {self.split_name!r} has {n} (every 1% would be empty)"
                )
            v = p * (n // 100)
            if v != int(v):
                raise SplitError(
                    f"{str(self)!r}: 'pct1_dropremainder' works in whole percents; {p}% is not"
                )
            i = int(v)
        return n + i if i < 0 else i

    def _shard(self, k: int, info: SplitSizes) -> int:
        s = info.num_shards
        single = self.from_ is not None and (
            self.to == self.from_ + 1 or (self.from_ == -1 and self.to is None))
        if single and not -s <= int(self.from_) < s:  # type: ignore[arg-type]
            raise SplitError(
                f"{str(self)!r}: shard {self.from_} does not exist: split "
                f"{self.split_name!r} has {s} shard{'s' if s != 1 else ''} "
                f"(indices 0..{s - 1})"
            )
        if abs(k) > s:
            raise SplitError(
                f"{str(self)!r}: shard {k} is out of range: split {self.split_name!r} has "
                f"{s} shard{'s' if s != 1 else ''} (indices 0..{s - 1}, bounds -{s}..{s})"
            )
        return sum(info.shard_lengths[: s + k if k < 0 else k])
