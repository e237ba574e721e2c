"""Features inferred from in-memory columns, for ``prepare(path, splits)`` without ``features=``.

The rules are those of ``thresher prepare`` (:mod:`thresher.sources.write.inputs`), applied to
the columns of every split together:

- a NumPy array (first axis = examples) or a list of numbers/arrays: ``Scalar(dtype)`` or
  ``Tensor(shape, dtype)``, with ``None`` for the axes whose size varies between examples;
  a uint8 array named ``image``/``images``/``img`` of 2 or 3 axes per example becomes
  ``Image(encoding='none')`` (a channel axis is added to 2-D images), and a 1-D integer
  array named ``label``/``labels`` ``ClassLabel(num_classes=max + 1)``;
- strings (a list of ``str`` or a NumPy ``str_`` array): ``Text()``;
- bytes (a list of ``bytes`` or a NumPy ``bytes_`` array): ``Tensor((None,), 'uint8')``
  (thresher has no bytes feature; a record decodes to a uint8 array, ``.tobytes()`` gives the
  bytes back);
- a dict of columns: a dict of features.

Example:
    >>> import numpy as np
    >>> from thresher.sources.write.infer import infer_features
    >>> features, splits = infer_features({"train": {"x": np.zeros((4, 3), np.float32),
    ...                                              "label": np.array([0, 2, 1, 1]),
    ...                                              "name": ["a", "b", "c", "d"]}})
    >>> features
    {'label': ClassLabel(num_classes=3), 'name': Text(), 'x': Tensor(shape=(3,), dtype=float32)}
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

import numpy as np

from thresher.errors import ConfigError
from thresher.features import Tensor, Text
from thresher.sources.write.inputs import array_features

__all__ = ["describe_features", "infer_features"]


class _BytesColumn(Sequence[np.ndarray]):
    """A column of bytes seen as uint8 arrays (what ``Tensor((None,), 'uint8')`` encodes)."""

    def __init__(self, values: Sequence[bytes]) -> None:
        self.values = values

    def __len__(self) -> int:
        return len(self.values)

    def __getitem__(self, i: Any) -> Any:
        return np.frombuffer(bytes(self.values[i]), np.uint8)


def _kind(col: Any, where: str) -> str:
    if isinstance(col, np.ndarray):
        if col.ndim == 0:
            raise ConfigError(f"{where}: a column needs one row per example, got a 0-d array")
        if col.dtype.kind in "biuf":
            return "numbers"
        if col.dtype.kind == "U":
            return "text"
        if col.dtype.kind == "S":
            return "bytes"
        col = list(col)
    if not isinstance(col, Sequence) or isinstance(col, (str, bytes)):
        raise ConfigError(f"{where}: a column is an array or a list with one value per example, "
                          f"got {type(col).__name__}; pass features= to describe other inputs")
    if col and all(isinstance(v, str) for v in col):
        return "text"
    if col and all(isinstance(v, (bytes, bytearray)) for v in col):
        return "bytes"
    return "numbers"


def _numbers(col: Any, where: str) -> np.ndarray | list[np.ndarray]:
    """The column as one array, or a list of per-example arrays when their shapes differ."""
    if isinstance(col, np.ndarray) and col.dtype.kind in "biuf":
        return col
    rows = [np.asarray(v) for v in col]
    if any(r.dtype.kind not in "biuf" for r in rows):
        kinds = sorted({type(v).__name__ for v in col})
        raise ConfigError(f"{where}: cannot infer a feature from values of types {kinds}; "
                          "pass features= (thresher.features) for this column")
    if len({r.shape for r in rows}) <= 1:
        return np.stack(rows) if rows else np.zeros((0,))
    if len({r.ndim for r in rows}) > 1:
        raise ConfigError(f"{where}: the examples have different numbers of axes; pass features=")
    return rows


def _ragged_feature(cols: list[list[np.ndarray]]) -> Tensor:
    rows = [r for c in cols for r in c]
    dtype = np.result_type(*[r.dtype for r in rows])
    shape = tuple(d if all(r.shape[i] == d for r in rows) else None
                  for i, d in enumerate(rows[0].shape))
    return Tensor(shape, dtype)


def _leaf(key: str, cols: dict[str, Any], where: str) -> tuple[Any, dict[str, Any]]:
    kinds = {_kind(c, f"{where} of split {s!r}") for s, c in cols.items()}
    if len(kinds) > 1:
        raise ConfigError(f"{where}: the splits hold different kinds of values ({sorted(kinds)})")
    kind = kinds.pop()
    if kind == "text":
        return Text(), cols
    if kind == "bytes":
        return Tensor((None,), "uint8"), {s: _BytesColumn(c) for s, c in cols.items()}
    arrays = {s: _numbers(c, f"{where} of split {s!r}") for s, c in cols.items()}
    if any(isinstance(a, list) for a in arrays.values()):
        ragged = {s: list(a) for s, a in arrays.items()}
        return _ragged_feature(list(ragged.values())), ragged
    dense = {s: {key: cast(np.ndarray, a)} for s, a in arrays.items()}
    feature = array_features(dense, set(), set(), None)[key]
    return feature, {s: d[key] for s, d in dense.items()}


def _infer(splits: dict[str, Mapping[str, Any]], where: str) -> tuple[dict[str, Any], dict[str, Any]]:
    names = list(splits)
    keys = set(splits[names[0]])
    for s in names[1:]:
        if set(splits[s]) != keys:
            raise ConfigError(f"{where or 'the columns'}: split {s!r} has {sorted(splits[s])} but "
                              f"split {names[0]!r} has {sorted(keys)}")
    features: dict[str, Any] = {}
    out: dict[str, dict[str, Any]] = {s: {} for s in names}
    for key in sorted(keys):
        path = f"{where}/{key}" if where else key
        cols = {s: splits[s][key] for s in names}
        if all(isinstance(c, Mapping) for c in cols.values()):
            features[key], inner = _infer(cols, path)
        elif any(isinstance(c, Mapping) for c in cols.values()):
            raise ConfigError(f"column {path!r} is a dict in some splits and not in others")
        else:
            features[key], inner = _leaf(key, cols, f"column {path!r}")
        for s in names:
            out[s][key] = inner[s]
    return features, out


def infer_features(splits: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(features, splits)`` from splits given as (nested) dicts of columns; the returned
    splits hold the same values (the caller's dicts are not changed), shaped for the features.

    ConfigError when a split is not a dict of columns (an iterable of examples needs
    ``features=``) or a column cannot be described.
    """
    for name, cols in splits.items():
        if not isinstance(cols, Mapping):
            raise ConfigError(f"split {name!r} is a {type(cols).__name__}, not a dict of columns: "
                              "features can be inferred only from columns; pass features= "
                              "(thresher.features) for an iterable of examples")
    return _infer({s: c for s, c in splits.items()}, "")


def describe_features(features: Any, indent: str = "  ") -> str:
    """The lines that say what was inferred (nested dicts indented)."""
    lines = []
    for key, f in features.items():
        if isinstance(f, dict):
            lines.append(f"{indent}{key}:")
            lines.append(describe_features(f, indent + "  "))
        else:
            lines.append(f"{indent}{key}: {f!r}")
    return "\n".join(lines)
