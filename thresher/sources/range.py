"""RangeDataSource: the integers of ``range(start, stop, step)`` as records."""

from __future__ import annotations

from collections.abc import Sequence

from thresher.errors import ConfigError
from thresher.sources.protocol import check_key, check_keys

__all__ = ["RangeDataSource"]


class RangeDataSource:
    """The records are the integers ``start, start + step, ...`` below ``stop``.

    Useful for tests and for measuring per-record overhead.

    Example:
        >>> from thresher.sources import RangeDataSource
        >>> src = RangeDataSource(10, 20, 3)
        >>> len(src), src[0], src.__getitems__([1, 3])
        (4, 10, [13, 19])
    """

    def __init__(self, start: int, stop: int, step: int = 1) -> None:
        if step == 0:
            raise ConfigError("RangeDataSource step must not be 0")
        self._range = range(int(start), int(stop), int(step))

    def __len__(self) -> int:
        return len(self._range)

    def __getitem__(self, record_key: int) -> int:
        return self._range[check_key(record_key, len(self._range), repr(self))]

    def __getitems__(self, record_keys: Sequence[int]) -> list[int]:
        r = self._range
        keys = check_keys(record_keys, len(r), repr(self))
        return (keys * r.step + r.start).tolist()

    def __repr__(self) -> str:
        r = self._range
        return f"RangeDataSource({r.start}, {r.stop}, {r.step})"
