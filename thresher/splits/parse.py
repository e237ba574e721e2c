"""Parsing split strings: ``"train[:75%]+test"`` -> a split object; resolving with context.

Grammar (spaces are allowed around ``+`` and at the ends, nowhere else)::

    spec     := part ("+" part)*
    part     := NAME ["[" selector "]"] ["(" rounding ")"]
    selector := bound ":" bound | bound ":" | ":" bound | INT "shard"
    bound    := ["-"] NUMBER ["%" | "shard"]
    rounding := "closest" | "pct1_dropremainder"

NAME is letters, digits, ``_`` and ``-``; ``all`` means every split. Both bounds of a
slice use the same unit; only percents can be fractional (``train[:1.5%]``).

Example:
    >>> from thresher.splits import ReadInstruction
    >>> ReadInstruction.from_spec("train[:25%](pct1_dropremainder) + test[4shard]")
    SplitUnion('train[:25%](pct1_dropremainder)+test[4shard]')
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from thresher.errors import SplitError
from thresher.splits.base import (
    ALL,
    SPLIT_NAME_RE,
    AbsoluteInstruction,
    AbstractSplit,
    SplitArg,
    SplitSizeLike,
    SplitUnion,
    register_parser,
)
from thresher.splits.foreign import ForeignSplit, is_foreign_split
from thresher.splits.read_instruction import ROUNDINGS, ReadInstruction

__all__ = ["parse_split", "resolve_split"]

_PLUS_RE = re.compile(r"\s*\+\s*")
_PART_RE = re.compile(r"(?P<name>[^\[\]()]*)(?:\[(?P<sel>[^\[\]]*)\])?(?:\((?P<rnd>[^()]*)\))?")
_BOUND_RE = re.compile(r"(?P<val>-?[0-9_.]+)(?P<unit>%|shard)?")
_HELP = "see thresher.splits for the syntax, e.g. 'train[:75%]+test'"


def _fail(spec: str, part: str, why: str) -> SplitError:
    where = f"split {spec!r}" if part == spec else f"split {spec!r} (part {part!r})"
    return SplitError(f"{where}: {why}")


def _diagnose(part: str) -> str:
    if part.count("[") != part.count("]"):
        return "unbalanced brackets: every '[' needs a matching ']'"
    if part.count("(") != part.count(")"):
        return "unbalanced parentheses"
    if part.startswith("[") or part.startswith("("):
        return "the split name is missing before the brackets"
    return "malformed: expected NAME, NAME[from:to] or NAME[from:to](rounding); " + _HELP


def _parse_bound(spec: str, part: str, text: str) -> tuple[int | float | None,
                                                             str | None]:
    if text == "":
        return None, None
    m = _BOUND_RE.fullmatch(text)
    if not m:
        raise _fail(spec, part, f"bad slice bound {text!r}: expected an integer, a percent "
                                "('25%', '1.5%') or a shard ('4shard')")
    val, unit = m.group("val"), m.group("unit") or "abs"
    number: int | float
    try:
        number = int(val)
    except ValueError:
        if "." not in val:
            raise _fail(spec, part, f"bad slice bound {text!r}: {val!r} is not an "
                                    "integer") from None
        if unit != "%":
            raise _fail(spec, part, f"bad slice bound {text!r}: only percents can be "
                                    "fractional (record and shard bounds are integers)") from None
        try:
            number = float(val)
        except ValueError:
            raise _fail(spec, part, f"bad slice bound {text!r}: {val!r} is not a number") from None
    return number, unit


def _parse_part(spec: str, part: str) -> AbstractSplit:
    if part == "":
        raise _fail(spec, part, "empty part: '+' must join two splits (e.g. 'train+test')")
    m = _PART_RE.fullmatch(part)
    if not m:
        raise _fail(spec, part, _diagnose(part))
    name, sel, rnd = m.group("name"), m.group("sel"), m.group("rnd")
    if not SPLIT_NAME_RE.fullmatch(name):
        why = ("the split name is missing" if name == "" else
               f"invalid split name {name!r}: names are letters, digits, '_' and '-'")
        raise _fail(spec, part, why)
    rounding = "closest" if rnd is None else rnd
    if rounding not in ROUNDINGS:
        raise _fail(spec, part, f"unknown rounding ({rnd}); use one of "
                                + ", ".join(f"({r})" for r in ROUNDINGS))
    if name == ALL:
        if sel is not None:
            raise _fail(spec, part, "'all' (the union of every split) cannot be sliced; "
                                    "slice each split instead, e.g. 'train[:50%]+test[:50%]'")
        return ReadInstruction(ALL, rounding=rounding)
    if sel is None:
        return ReadInstruction(name, rounding=rounding)
    pieces = sel.split(":")
    if len(pieces) > 2:
        raise _fail(spec, part, f"[{sel}] has {len(pieces) - 1} ':'; a slice is [from:to] "
                                "(steps are not supported)")
    bounds = [_parse_bound(spec, part, p) for p in pieces]
    if all(b[0] is None for b in bounds):
        raise _fail(spec, part, f"empty slice [{sel}]: give at least one bound, or no brackets "
                                "for the whole split")
    if len(bounds) == 1:
        (k, unit), = bounds
        if unit != "shard":
            raise _fail(spec, part, f"a single index [{sel}] is only allowed for shards "
                                    f"('{name}[{sel.rstrip('%')}shard]'); use a slice such "
                                    f"as '{name}[{sel}:...]'")
        assert isinstance(k, int)
        return ReadInstruction(name, k, None if k == -1 else k + 1, "shard", rounding)
    units = {u for _, u in bounds if u is not None}
    if len(units) > 1:
        a, b = pieces
        raise _fail(spec, part, f"[{sel}] mixes units ({a!r} and {b!r}): both bounds of a "
                                "slice must be records, percents or shards")
    try:
        return ReadInstruction(name, bounds[0][0], bounds[1][0], units.pop(), rounding)
    except SplitError as e:
        raise _fail(spec, part, str(e)) from None


@register_parser
def parse_split(spec: SplitArg) -> AbstractSplit:
    """Parses a split string; split objects are returned unchanged (another library's,
    such as TFDS's ReadInstruction, are wrapped in a ForeignSplit).

    Raises SplitError quoting ``spec`` and saying what is wrong.

    Example:
        >>> from thresher.splits.parse import parse_split
        >>> parse_split("test+train[-10:]")
        SplitUnion('test+train[-10:]')
    """
    if isinstance(spec, AbstractSplit):
        return spec
    if is_foreign_split(spec):  # TFDS's split objects, without importing TFDS
        return ForeignSplit(spec)
    if not isinstance(spec, str):
        raise SplitError(f"a split is a string such as 'train[:75%]' or a split object, "
                         f"got {type(spec).__name__} {spec!r}")
    text = spec.strip()
    if not text:
        raise SplitError(f"empty split string {spec!r}; name a split, e.g. 'train'")
    parts = [_parse_part(spec, p) for p in _PLUS_RE.split(text)]
    return parts[0] if len(parts) == 1 else SplitUnion.of(*parts)


def resolve_split(spec: SplitArg,
                  split_infos: Mapping[str, SplitSizeLike]) -> list[AbsoluteInstruction]:
    """Parses and resolves ``spec``; errors quote the whole expression.

    Example:
        >>> from thresher.splits.parse import resolve_split
        >>> [str(a) for a in resolve_split("all", {"train": 3, "test": 2})]
        ['train[0:3]', 'test[0:2]']
    """
    split = parse_split(spec)
    try:
        return split.to_absolute(split_infos)
    except SplitError as e:
        label = spec if isinstance(spec, str) else str(split)
        msg = str(e)
        own = f"{str(split)!r}: "
        if msg.startswith(own):  # a one-part split quotes itself: quote the user's text
            msg = msg[len(own):]
        if msg.startswith(f"split {label!r}"):
            raise
        raise SplitError(f"split {label!r}: {msg}") from None
