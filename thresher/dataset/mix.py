"""Weighted mixing: a closed-form schedule, and a virtual source of mixture positions.

The schedule deals mixture positions to K components in *periods* of ``period``
positions. Component j gets ``q_j`` slots of every period (the weights rounded by
largest remainder, so ``|q_j / period - w_j| < 1 / period``), spread evenly inside
the period (smooth weighted round robin); with a ``seed`` the slots of each period
are also permuted by a keyed bijection. How many positions of component j lie
among the first g is then ``(g // period) * q_j + prefix_j(g % period)``: position
-> (component, index in component) is O(1), with no replay, for any g.

A mixture is read through ``MixView``: key g is position g of the mixture. Each
component is a random-access view with its own shuffle and epochs. The mixture
ends just before the first position whose component has no element left (the
first component to run out ends it); with endless components it is endless.

Weights can change after a checkpoint: a *segment* (origin G, offsets n_j) says
that from mixture position G on, component j continues at its index n_j, under
the new weights (see ``DatasetIterator.set_state(..., reweight=True)``).

Example:
    >>> from thresher.dataset.mix import MixSchedule
    >>> s = MixSchedule([0.5, 0.25, 0.25], period=4)
    >>> [s.locate(g) for g in range(6)]
    [(0, 0), (1, 0), (2, 0), (0, 1), (0, 2), (1, 1)]
    >>> s.counts(6)
    [3, 2, 1]
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from thresher._validate import check_count, is_int
from thresher.dataset.views import ENDLESS
from thresher.errors import ConfigError, InvalidStateError, RecordKeyError
from thresher.loader.state_types import register_extension
from thresher.randomness.permutation import Permutation
from thresher.randomness.seeds import derive_seed
from thresher.sources.protocol import read_many

__all__ = ["MixSchedule", "MixSegment", "MixView", "quotas"]

_MAX_POSITION = 2**62  # as the state's positions

DOMAIN_MIX = 0x4D495820  # "MIX "


def quotas(weights: Sequence[float], period: int) -> list[int]:
    """The weights as whole slots of a period (largest remainder; ties to the first).

    Computed in exact rational arithmetic, so ties are real ties on every machine.

    Example:
        >>> from thresher.dataset.mix import quotas
        >>> quotas([1, 1, 1], 10), quotas([0.5, 0.3, 0.2], 1000)
        ([4, 3, 3], [500, 300, 200])
    """
    w = [Fraction(x) for x in weights]
    total = sum(w)
    exact = [x / total * period for x in w]
    q = [int(e) for e in exact]  # floor: all >= 0
    rest = period - sum(q)
    order = sorted(range(len(w)), key=lambda j: (-(exact[j] - q[j]), j))
    for j in order[:rest]:
        q[j] += 1
    return q


def _smooth_pattern(q: list[int]) -> np.ndarray:
    """Smooth weighted round robin: q_j picks of j in sum(q) steps, evenly spread."""
    total = sum(q)
    current = [0] * len(q)
    out = np.empty(total, dtype=np.int64)
    for t in range(total):
        best = 0
        for j in range(len(q)):
            current[j] += q[j]
            if current[j] > current[best]:
                best = j
        current[best] -= total
        out[t] = best
    return out


class MixSchedule:
    """Which component (and which of its elements) each mixture position takes."""

    def __init__(self, weights: Sequence[float], period: int = 1000, seed: int | None = None) -> None:
        w = [float(x) for x in weights]
        if not w or any(not np.isfinite(x) or x < 0 for x in w) or sum(w) <= 0:
            raise ConfigError(f"mix weights must be finite, >= 0 and not all 0; got {list(weights)}")
        check_count(period, "mix period", minimum=1)
        self.weights = w
        self.period = period
        self.seed = seed
        self.q = quotas(w, period)
        for j, (x, qj) in enumerate(zip(w, self.q, strict=False)):
            if x > 0 and qj == 0:
                raise ConfigError(f"mix weight {x} of component {j} is below one slot in a period of {period}; "
                                  f"raise period (to at least {int(np.ceil(sum(w) / x))})")
        self._base = _smooth_pattern(self.q)
        self._blocks: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def _block(self, t: int) -> tuple[np.ndarray, np.ndarray]:
        """(pattern, prefix) of period t; prefix[j, s] = slots of j among the first s."""
        got = self._blocks.get(t)
        if got is None:
            if self.seed is None and self._blocks:
                got = next(iter(self._blocks.values()))
            if got is None:
                pattern = self._base
                if self.seed is not None:
                    perm = Permutation(self.period, derive_seed(self.seed, DOMAIN_MIX, t))
                    pattern = self._base[perm(np.arange(self.period)).astype(np.int64)]
                onehot = pattern[None, :] == np.arange(len(self.q))[:, None]
                prefix = np.zeros((len(self.q), self.period + 1), dtype=np.int64)
                np.cumsum(onehot, axis=1, out=prefix[:, 1:])
                got = (pattern, prefix)
            if len(self._blocks) > 8:
                self._blocks.clear()
            self._blocks[t] = got
        return got

    def locate_many(self, g: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Mixture positions -> (components, indices in the components), int64 arrays."""
        g = np.asarray(g, dtype=np.int64)
        t, s = np.divmod(g, self.period)
        comp = np.empty_like(g)
        index = np.empty_like(g)
        q = np.asarray(self.q, dtype=np.int64)
        for tb in np.unique(t).tolist():
            where = t == tb
            pattern, prefix = self._block(tb)
            c = pattern[s[where]]
            comp[where] = c
            index[where] = tb * q[c] + prefix[c, s[where]]
        return comp, index

    def locate(self, g: int) -> tuple[int, int]:
        c, i = self.locate_many(np.array([g]))
        return int(c[0]), int(i[0])

    def counts(self, g: int) -> list[int]:
        """How many of the first g positions each component takes."""
        t, s = divmod(int(g), self.period)
        _, prefix = self._block(t)
        return [t * qj + int(prefix[j, s]) for j, qj in enumerate(self.q)]

    def position_of(self, j: int, m: int) -> int | None:
        """The position of component j's element m (0-based), or None if j never comes."""
        qj = self.q[j]
        if qj == 0:
            return None
        t, r = divmod(int(m), qj)
        _, prefix = self._block(t)
        s = int(np.searchsorted(prefix[j], r + 1)) - 1
        return t * self.period + s


class MixView:
    """Key g -> the element of the mixture at position g (a virtual source).

    Args:
        components: random-access views, one per component.
        lengths: their lengths, None for endless ones.
        schedule: the MixSchedule.
        origin, offsets: the segment (see the module docstring); 0 and zeros for a
            fresh mixture.

    Example:
        >>> from thresher.dataset.mix import MixSchedule, MixView
        >>> view = MixView([["a0", "a1", "a2"], ["b0", "b1"]], [3, 2], MixSchedule([1, 1], period=2))
        >>> len(view), view.__getitems__(list(range(len(view))))
        (5, ['a0', 'b0', 'a1', 'b1', 'a2'])
        >>> view.progress(3)
        [2, 1]
    """

    def __init__(self, components: Sequence[Any], lengths: Sequence[int | None], schedule: MixSchedule,
                 origin: int = 0, offsets: Sequence[int] | None = None) -> None:
        if len(components) != len(schedule.q):
            raise ConfigError(f"mix got {len(components)} datasets but {len(schedule.q)} weights")
        self._components = list(components)
        self.lengths = list(lengths)
        self.schedule = schedule
        self.origin = int(origin)
        self.offsets = [0] * len(components) if offsets is None else [int(x) for x in offsets]
        ends = []
        for j, n in enumerate(self.lengths):
            if n is None:
                continue
            if self.offsets[j] > n:
                raise ConfigError(f"mix component {j} has {n} elements but the segment starts it at {self.offsets[j]}")
            p = schedule.position_of(j, n - self.offsets[j])
            if p is not None:
                ends.append(p)
        self.endless = not ends
        self._len = ENDLESS if not ends else self.origin + min(ends)

    def __len__(self) -> int:
        return self._len

    def progress(self, g: int) -> list[int]:
        """How many elements of each component the first g mixture positions take."""
        if g < self.origin:
            raise RecordKeyError(f"mixture position {g} is before this segment's origin {self.origin}")
        return [o + c for o, c in zip(self.offsets, self.schedule.counts(g - self.origin), strict=False)]

    def __getitem__(self, key: int) -> Any:
        return self.__getitems__([key])[0]

    def __getitems__(self, keys: Sequence[int]) -> list[Any]:
        g = np.asarray(keys, dtype=np.int64)
        if g.size == 0:
            return []
        lo, hi = int(g.min()), int(g.max())
        if lo < self.origin or hi >= self._len:
            bad = lo if lo < self.origin else hi
            raise RecordKeyError(f"mixture position {bad} is outside this mixture's [{self.origin}, {self._len})")
        comp, index = self.schedule.locate_many(g - self.origin)
        index += np.asarray(self.offsets, dtype=np.int64)[comp]
        out: list[Any] = [None] * len(g)
        for j in np.unique(comp).tolist():
            where = np.flatnonzero(comp == j)
            for i, element in zip(where.tolist(), read_many(self._components[j], index[where].tolist()), strict=False):
                out[i] = element
        return out

    def __repr__(self) -> str:
        return f"MixView({len(self._components)} components, weights={self.schedule.weights})"


@register_extension("mix")
@dataclass(frozen=True)
class MixSegment:
    """A mixture's segment, saved in its iterator's state (``state['dataset']['mix']``): its weights,
    where it starts, and each component's offset."""

    weights: tuple[Any, ...]
    origin: int
    offsets: tuple[int, ...]

    def to_json(self) -> dict[str, Any]:
        return {"weights": list(self.weights), "origin": self.origin, "offsets": list(self.offsets)}

    @classmethod
    def from_json(cls, mix: Any) -> MixSegment:
        def count(x: Any) -> bool:
            return isinstance(x, int) and is_int(x, minimum=0, maximum=_MAX_POSITION)

        def weight(x: Any) -> bool:
            return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x >= 0

        if not (isinstance(mix, dict) and isinstance(mix.get("weights"), list) and count(mix.get("origin"))
                and isinstance(mix.get("offsets"), list) and all(map(count, mix["offsets"]))
                and all(map(weight, mix["weights"])) and len(mix["weights"]) == len(mix["offsets"])):
            raise InvalidStateError(f"state['dataset']['mix'] is malformed: {mix!r}; expected weights (numbers "
                                    ">= 0), an origin and offsets (ints in [0, 2**62]), one weight and offset "
                                    "per component")
        return cls(tuple(mix["weights"]), mix["origin"], tuple(mix["offsets"]))
