"""ClassLabel: an integer class id in ``[0, num_classes)``, with optional names.

Stored as an int64 scalar; decodes to ``np.int64``. Values may be written as ints or
as names.

Example:
    >>> from thresher.features import ClassLabel
    >>> c = ClassLabel(names=["cat", "dog"])
    >>> c.num_classes, c.str2int("dog"), c.int2str(0)
    (2, 1, 'cat')
    >>> c.decode_payload(c.encode_payload("dog"), 0, 8)
    np.int64(1)
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from thresher._validate import is_int
from thresher.errors import FeatureError
from thresher.features.tensor import Scalar

__all__ = ["ClassLabel"]


class ClassLabel(Scalar):
    """A class id; give ``num_classes`` or ``names`` (or both, agreeing).

    Example:
        >>> from thresher.features import ClassLabel
        >>> ClassLabel(num_classes=10)
        ClassLabel(num_classes=10)
    """

    type_name = "ClassLabel"

    def __init__(self, num_classes: int | None = None,
                 names: Sequence[str] | None = None) -> None:
        super().__init__("int64")
        if names is not None:
            if isinstance(names, (str, bytes)) or not isinstance(names, Iterable) or not all(
                    isinstance(n, str) for n in names):
                raise FeatureError(f"ClassLabel: names must be a list of strings, got {names!r}")
            names = list(names)
            if len(set(names)) != len(names):
                dup = sorted({n for n in names if names.count(n) > 1})
                raise FeatureError(f"ClassLabel: duplicate names {dup}")
            if num_classes is not None and num_classes != len(names):
                raise FeatureError(f"ClassLabel: num_classes={num_classes} but {len(names)} "
                                   "names were given")
            num_classes = len(names)
        if not is_int(num_classes, minimum=0):
            raise FeatureError("ClassLabel needs num_classes (an int >= 0) or names, got "
                               f"num_classes={num_classes!r}")
        self.num_classes: int = int(num_classes)
        self._names: list[str] | None = names
        self._index: dict[str, int] = {n: i for i, n in enumerate(names)} if names else {}

    @property
    def names(self) -> list[str]:
        """The class names (``'0'``, ``'1'``, ... when none were given)."""
        return list(self._names) if self._names is not None else [
            str(i) for i in range(self.num_classes)]

    def __repr__(self) -> str:
        if self._names is not None:
            shown = self._names[:5] + (["..."] if len(self._names) > 5 else [])
            return f"ClassLabel(num_classes={self.num_classes}, names={shown})"
        return f"ClassLabel(num_classes={self.num_classes})"

    def __hash__(self) -> int:
        return hash((self.type_name, self.num_classes))

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type_name, "num_classes": self.num_classes, "names": self._names}

    def str2int(self, name: str) -> int:
        """The id of a class name."""
        if name in self._index:
            return self._index[name]
        if self._names is None and name.isdigit() and int(name) < self.num_classes:
            return int(name)
        known = ", ".join(map(repr, self.names[:20]))
        raise FeatureError(f"unknown class name {name!r}; the classes are {known}"
                           + (" ..." if self.num_classes > 20 else ""))

    def int2str(self, class_id: int) -> str:
        """The name of a class id."""
        if not 0 <= int(class_id) < self.num_classes:
            raise FeatureError(f"class id {class_id} is not in [0, {self.num_classes})")
        return self.names[int(class_id)]

    def encode_payload(self, value: Any, where: str = "value") -> bytes:
        if isinstance(value, (str, np.str_)):
            try:
                value = self.str2int(str(value))
            except FeatureError as e:
                raise FeatureError(f"{where}: {e}") from None
        elif isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Integral,
                                                                             np.ndarray)):
            raise FeatureError(f"{where}: a class label is an int or a class name, got "
                               f"{type(value).__name__} {value!r}")
        arr = np.asarray(value)
        if arr.shape != () or arr.dtype.kind not in "iu":
            raise FeatureError(f"{where}: a class label is one int, got {value!r}")
        if not 0 <= int(arr) < self.num_classes:
            raise FeatureError(f"{where}: class id {int(arr)} is not in [0, {self.num_classes})")
        return int(arr).to_bytes(8, "little", signed=True)
