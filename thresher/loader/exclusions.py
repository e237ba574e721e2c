"""What a process leaves out of its stream: blocked records and positions consumed elsewhere.

Two kinds of exclusion, both recorded in the state (``state["dataset"]``) and applied
when positions are sampled, before any record is read:

- ``skip_records``: record keys that are never delivered (a blocklist), kept as
  key ranges (``SkipRanges``: consecutive keys cost one pair).
- ``consumed``: the global positions that processes of an earlier geometry had
  consumed when the run was checkpointed and restored on another number of
  processes (``thresher.loader.merge.merge_states``). Below the ``watermark`` every
  position is consumed; past it, a ``Layer`` per earlier geometry says which: a
  position of that geometry's shard s is consumed when it is below ``next[s]``
  (the shard's next global position at the checkpoint). The size is bounded by the
  processes of the geometries whose shards had not all passed the watermark, never
  by the dataset.

Example:
    >>> c = Consumed(8, (Layer(2, 1, (10, 13)),))
    >>> c.contains(np.arange(8, 14)).tolist()    # shard 0 had consumed 8; shard 1: 9, 11
    [True, True, False, True, False, False]
    >>> Consumed.from_json(c.to_json()) == c
    True
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from thresher._validate import is_int, user_path
from thresher.errors import ConfigError, InvalidStateError
from thresher.loader.skips import SkipRanges

__all__ = ["Consumed", "Exclusions", "Layer", "record_blocklist"]

_MAX_POSITION = 2**62
_MAX_SHARDS = 2**16
_MAX_BLOCK = 2**31
MAX_LAYERS = 64
_WHERE = "state['dataset']['consumed']"

#: ``skip_records``: record keys, or the path of a text file of keys (one per line, ``#`` comments).
RecordKeys = Iterable[int] | str | os.PathLike[str]


def record_blocklist(value: RecordKeys, num_records: int) -> SkipRanges:
    """The keys of ``skip_records`` (an iterable of ints, or a file of keys) as key ranges.

    Raises ConfigError naming the key (and the file and line) that is not a key of the source.

    Example:
        >>> record_blocklist([7, 3, 4], 10).ranges
        ((3, 5), (7, 8))
    """
    if isinstance(value, (str, os.PathLike)):
        path = user_path(value)
        keys: list[int] = []
        try:
            with open(path) as f:
                for n, line in enumerate(f, 1):
                    text = line.split("#", 1)[0].strip()
                    if not text:
                        continue
                    try:
                        keys.append(int(text))
                    except ValueError:
                        raise ConfigError(f"skip_records file {path}, line {n}: {text[:40]!r} is not a record key "
                                          "(one integer per line; # starts a comment)") from None
        except OSError as e:
            raise ConfigError(f"cannot read the skip_records file {path}: {e}") from e
        where = f" in {path}"
    else:
        if isinstance(value, (bytes, dict)) or not isinstance(value, Iterable):
            raise ConfigError(f"skip_records must be record keys (ints) or the path of a file of keys, got {value!r}")
        keys = list(value)
        where = ""
    for k in keys:
        if not is_int(k, 0, num_records - 1):
            raise ConfigError(f"skip_records{where}: {k!r} is not a record key of this source (ints in "
                              f"[0, {num_records}))")
    return SkipRanges.of([(int(k), int(k) + 1) for k in keys])


def _int(x: Any, lo: int, hi: int) -> bool:
    return is_int(x, lo, hi, numpy=False)


@dataclass(frozen=True)
class Layer:
    """The checkpointed progress of the shards of one earlier geometry.

    ``next[s]``: the global position of shard s's next element when it was checkpointed;
    every position of shard s below it was consumed.
    """

    shard_count: int
    block_size: int
    next: tuple[int, ...]

    def contains(self, g: np.ndarray) -> np.ndarray:
        shard = (g // self.block_size) % self.shard_count
        return g < np.asarray(self.next, dtype=np.int64)[shard]

    def to_json(self) -> dict[str, Any]:
        return {"shards": self.shard_count, "block": self.block_size, "next": list(self.next)}

    @classmethod
    def from_json(cls, d: Any) -> Layer:
        ok = (isinstance(d, dict) and _int(d.get("shards"), 1, _MAX_SHARDS) and _int(d.get("block"), 1, _MAX_BLOCK)
              and isinstance(d.get("next"), list) and len(d["next"]) == d["shards"]
              and all(_int(x, 0, _MAX_POSITION) for x in d["next"]))
        if not ok:
            raise InvalidStateError(f"{_WHERE}['layers'] has a malformed layer: {str(d)[:200]}; expected "
                                    "{'shards': P (1..2**16), 'block': b (1..2**31), 'next': P positions in "
                                    "[0, 2**62]}")
        return cls(d["shards"], d["block"], tuple(d["next"]))


@dataclass(frozen=True)
class Consumed:
    """Global positions consumed before the current geometry took over (see the module docstring).

    ``merged``: this is the state made by ``merge_states``: every shard of the
    restoring geometry starts at its first position at or past the watermark.
    ``parent``: in a merged state, the ``digest`` of what the merged processes had
    consumed before (``"fresh"``: nothing); an audit uses it to tell run segments apart.
    """

    watermark: int
    layers: tuple[Layer, ...] = ()
    merged: bool = False
    parent: str = ""

    def contains(self, g: np.ndarray) -> np.ndarray:
        """Which of the global positions ``g`` (int64) were consumed."""
        g = np.asarray(g, dtype=np.int64)
        out = g < self.watermark
        for layer in self.layers:
            out |= layer.contains(g)
        return out

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"watermark": self.watermark, "layers": [x.to_json() for x in self.layers]}
        if self.merged:
            out["merged"] = True
            out["parent"] = self.parent
        return out

    @classmethod
    def from_json(cls, d: Any) -> Consumed:
        parent = d.get("parent", "") if isinstance(d, dict) else None
        if not (isinstance(d, dict) and _int(d.get("watermark"), 0, _MAX_POSITION)
                and isinstance(d.get("layers"), list) and len(d["layers"]) <= MAX_LAYERS
                and isinstance(d.get("merged", False), bool)
                and isinstance(parent, str) and len(parent) <= 32 and (parent.isalnum() or parent == "")):
            raise InvalidStateError(f"{_WHERE} is malformed: {str(d)[:200]}; expected a watermark in [0, 2**62], "
                                    f"a list of at most {MAX_LAYERS} layers, an optional merged flag and parent "
                                    "digest")
        return cls(d["watermark"], tuple(Layer.from_json(x) for x in d["layers"]), d.get("merged", False), parent)

    def unmerged(self) -> Consumed:
        """The same consumed positions, as the state of one restored process records them."""
        return replace(self, merged=False, parent="")

    @staticmethod
    def digest(consumed: Consumed | None) -> str:
        """A short name for what a run segment leaves out (``"fresh"``: nothing).

        Example:
            >>> Consumed.digest(None), len(Consumed.digest(Consumed(4)))
            ('fresh', 16)
        """
        if consumed is None:
            return "fresh"
        text = json.dumps(consumed.unmerged().to_json(), sort_keys=True)
        import hashlib  # here, not at the top: a worker (and the fork server) never makes one

        return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Exclusions:
    """What the chunk processor drops before reading: blocked keys and consumed positions.

    Example:
        >>> ex = Exclusions(SkipRanges.of([(5, 6)]), Consumed(2))
        >>> ex.keep(np.arange(8), np.arange(8)).tolist()
        [False, False, True, True, True, False, True, True]
    """

    records: SkipRanges = field(default_factory=SkipRanges)
    consumed: Consumed | None = None

    def __bool__(self) -> bool:
        return bool(self.records) or self.consumed is not None

    def keep(self, globals_: np.ndarray, keys: np.ndarray) -> np.ndarray | None:
        """A bool mask of the positions to keep, or None when all are kept."""
        drop: np.ndarray | None = None
        if self.records:
            drop = self.records.contains(keys)
        if self.consumed is not None:
            c = self.consumed.contains(globals_)
            drop = c if drop is None else drop | c
        if drop is None or not drop.any():
            return None
        return ~drop
