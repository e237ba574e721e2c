"""Converting local files into ``prepare`` inputs: arrays, image folders, CSV, JSON Lines.

Each split is given as one or more inputs:

- ``data.npz``: every array in it is a feature (first axis = examples);
- ``x.npy`` or ``KEY=x.npy``: one array, named by the file stem or KEY;
- a directory with one subdirectory per class (``root/cat/1.png``): features
  ``image``, ``label`` (class names sorted over all splits) and ``filename``;
- ``table.csv`` (header row) or ``table.jsonl`` (one JSON object per line).

Features are inferred from the values of all splits together: integer columns become
``Scalar('int64')``, numbers ``Scalar('float64')``, other strings ``Text()``, JSON lists
``Tensor`` (axes whose size varies become None), uint8 arrays named ``image``/``images``/
``img`` become ``Image(encoding='none')`` and integer arrays named ``label``/``labels``
become ``ClassLabel``. ``class_labels`` / ``images`` name more columns explicitly (an
image column of a table holds file paths, relative to the table).

Example:
    >>> import tempfile, os, numpy as np
    >>> from thresher.sources.write.inputs import load_inputs
    >>> d = tempfile.mkdtemp()
    >>> np.savez(os.path.join(d, "train.npz"), image=np.zeros((4, 8, 8), np.uint8),
    ...          label=np.array([0, 1, 2, 1]))
    >>> features, splits = load_inputs({"train": [os.path.join(d, "train.npz")]})
    >>> features
    {'image': Image(shape=(8, 8, 1), encoding='none'), 'label': ClassLabel(num_classes=3)}
    >>> len(splits["train"]["label"])
    4
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from thresher._validate import user_path
from thresher.errors import ConfigError, FeatureError, SourceNotFoundError
from thresher.features import ClassLabel, Feature, Image, Scalar, Tensor, Text

__all__ = ["IMAGE_SUFFIXES", "array_features", "load_inputs"]

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp", ".tif", ".tiff")
_IMAGE_NAMES = {"image", "images", "img"}
_LABEL_NAMES = {"label", "labels"}


def _expand(item: str) -> str:
    """An input with ``~`` and ``$VAR`` expanded, also after ``KEY=``."""
    path = user_path(item)
    if "=" in item and not os.path.exists(path):
        key, rest = item.split("=", 1)
        return f"{key}={user_path(rest)}"
    return path


def _kind(item: str) -> str:
    path = item.split("=", 1)[1] if "=" in item and not os.path.exists(item) else item
    if os.path.isdir(path):
        return "folder"
    low = path.lower()
    for suffix, kind in ((".npz", "arrays"), (".npy", "arrays"), (".csv", "table"),
                         (".jsonl", "table"), (".ndjson", "table"), (".json", "table")):
        if low.endswith(suffix):
            if not os.path.isfile(path):
                raise SourceNotFoundError(f"input file {path!r} does not exist")
            return kind
    if not os.path.exists(path):
        raise SourceNotFoundError(f"input {path!r} does not exist")
    raise ConfigError(f"input {item!r}: unknown kind; use .npz, .npy, .csv, .jsonl or a folder "
                      "of class subfolders")


# ---- arrays ---------------------------------------------------------------------------

def _load_arrays(items: Sequence[str]) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    for item in items:
        key, path = (item.split("=", 1) if "=" in item and not os.path.exists(item)
                     else (None, item))
        try:
            loaded = np.load(path, allow_pickle=False)
        except ValueError as e:
            raise ConfigError(f"{path!r}: cannot load without pickle ({e}); save plain "
                              "numeric arrays") from None
        arrays = dict(loaded.items()) if isinstance(loaded, np.lib.npyio.NpzFile) else {
            key or os.path.splitext(os.path.basename(path))[0]: loaded}
        for k, v in arrays.items():
            if k in out:
                raise ConfigError(f"feature {k!r} is given twice for one split")
            if v.ndim == 0 or v.dtype.kind not in "biuf":
                raise ConfigError(f"{path!r}: array {k!r} ({v.dtype}, shape {v.shape}) is not a "
                                  "numeric array with one row per example")
            out[k] = v
    lengths = {k: len(v) for k, v in out.items()}
    if len(set(lengths.values())) > 1:
        raise ConfigError(f"arrays of one split have different lengths: {lengths}")
    return out


def array_features(splits: Mapping[str, dict[str, np.ndarray]], class_labels: set[str],
                    images: set[str], encoding: str | None) -> dict[str, Feature]:
    first = next(iter(splits.values()))
    for name, arrays in splits.items():
        if set(arrays) != set(first):
            raise ConfigError(f"split {name!r} has arrays {sorted(arrays)} but another split has "
                              f"{sorted(first)}")
    features: dict[str, Feature] = {}
    for key in sorted(first):
        cols = [s[key] for s in splits.values()]
        dtype = np.result_type(*[c.dtype for c in cols])
        shape = tuple(d if all(c.shape[1:][i] == d for c in cols) else None
                      for i, d in enumerate(cols[0].shape[1:]))
        if any(c.ndim != cols[0].ndim for c in cols):
            raise ConfigError(f"array {key!r} has a different number of axes in different splits")
        is_image = key in images or (key.lower() in _IMAGE_NAMES and dtype == np.uint8
                                     and len(shape) in (2, 3))
        is_label = key in class_labels or (key.lower() in _LABEL_NAMES and dtype.kind in "iu"
                                           and not shape)
        if is_image:
            if len(shape) == 2:
                shape = (*shape, 1)
                for s in splits.values():
                    s[key] = s[key][..., None]
            features[key] = Image(shape, encoding=encoding or "none")
        elif is_label:
            if dtype.kind not in "iu" or shape:
                raise ConfigError(f"class label {key!r} must be a 1-D integer array")
            top = max((int(c.max()) for c in cols if c.size), default=-1)
            features[key] = ClassLabel(num_classes=top + 1)
        else:
            features[key] = Scalar(dtype) if not shape else Tensor(shape, dtype)
    return features


# ---- image folders ----------------------------------------------------------------------

def _scan_folder(root: str) -> list[tuple[str, str, str]]:
    """(path, class name, relative name) of every image under ``root/CLASS/``."""
    classes = sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d))
                     and not d.startswith("."))
    if not classes:
        raise ConfigError(f"image folder {root!r} has no class subfolders (expected "
                          f"{root}/CLASS_NAME/image.png)")
    out = []
    for c in classes:
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, c)):
            dirnames.sort()
            for f in sorted(filenames):
                if f.lower().endswith(IMAGE_SUFFIXES):
                    full = os.path.join(dirpath, f)
                    out.append((full, c, os.path.relpath(full, root)))
    if not out:
        raise ConfigError(f"image folder {root!r} has no images ({', '.join(IMAGE_SUFFIXES)})")
    return out


# ---- tables -----------------------------------------------------------------------------

def _read_table(path: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    if path.lower().endswith(".csv"):
        with open(path, newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            for i, row in enumerate(reader):
                if None in row or any(v is None for v in row.values()):
                    raise ConfigError(f"{path!r} line {i + 2}: wrong number of fields")
                rows.append(dict(row))
        return [_parse_csv_row(r) for r in rows]
    with open(path, encoding="utf-8") as f:
        for i, line in enumerate(f):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                raise ConfigError(f"{path!r} line {i + 1}: not JSON ({e})") from None
            if not isinstance(obj, dict):
                raise ConfigError(f"{path!r} line {i + 1}: expected a JSON object")
            rows.append(obj)
    return rows


def _parse_csv_row(row: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in row.items():
        out[k] = v
        for cast in (int, float):
            try:
                out[k] = cast(v)
                break
            except ValueError:
                pass
    return out


def _infer(values: list[Any], where: str) -> Feature:
    if all(isinstance(v, dict) for v in values):
        keys = set().union(*values) if values else set()
        for v in values:
            if set(v) != keys:
                raise ConfigError(f"{where}: rows have different keys ({sorted(set(v) ^ keys)})")
        return {k: _infer([v[k] for v in values], f"{where}/{k}") for k in sorted(keys)}  # type: ignore[return-value]
    if all(isinstance(v, bool) for v in values):
        return Scalar("bool")
    if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return Scalar("int64")
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        return Scalar("float64")
    if all(isinstance(v, str) for v in values):
        return Text()
    if all(isinstance(v, list) for v in values):
        try:
            arrays = [np.asarray(v) for v in values]
        except ValueError:
            raise ConfigError(
                f"{where}: nested lists are ragged; lists must be rectangular") from None
        if any(a.dtype.kind not in "biuf" for a in arrays) or len({a.ndim for a in arrays}) > 1:
            raise ConfigError(f"{where}: lists must hold numbers, with the same nesting depth")
        dtype = np.result_type(*arrays) if arrays else np.dtype("float64")
        dtype = np.dtype("int64") if dtype.kind in "iu" else dtype
        shape = tuple(d if all(a.shape[i] == d for a in arrays) else None
                      for i, d in enumerate(arrays[0].shape))
        return Tensor(shape, dtype)
    kinds = sorted({type(v).__name__ for v in values})
    raise ConfigError(f"{where}: cannot infer one feature from values of types {kinds} "
                      "(null values are not supported)")


def _table_features(splits: Mapping[str, list[dict[str, Any]]], class_labels: set[str],
                    images: set[str], encoding: str | None, channels: int) -> dict[str, Any]:
    rows = [r for rs in splits.values() for r in rs]
    if not rows:
        raise ConfigError("the tables have no rows")
    plain = [{k: v for k, v in r.items() if k not in class_labels and k not in images}
             for r in rows]
    features: dict[str, Any] = _infer(plain, "column") if plain and plain[0] else {}  # type: ignore[assignment]
    for key in sorted(class_labels):
        values = [r.get(key) for r in rows]
        ints = [v for v in values if isinstance(v, int) and not isinstance(v, bool)]
        if len(ints) == len(values):
            features[key] = ClassLabel(num_classes=max(ints) + 1)
        elif all(isinstance(v, (str, int)) for v in values):
            for rs in splits.values():
                for r in rs:
                    r[key] = str(r[key])
            features[key] = ClassLabel(names=sorted({str(v) for v in values}))
        else:
            raise ConfigError(f"class label column {key!r} is missing or not int/str in some rows")
    for key in sorted(images):
        if not all(isinstance(r.get(key), str) for r in rows):
            raise ConfigError(f"image column {key!r} must hold file paths")
        features[key] = Image((None, None, channels), encoding=encoding or "original")
    return features


def _check_named(class_labels: Sequence[str], images: Sequence[str], present: set[str], what: str) -> None:
    for option, names in (("--class-label / class_labels", class_labels), ("--image / images", images)):
        missing = sorted(set(names) - present)
        if missing:
            raise ConfigError(f"{option} names {what}s {missing} that the inputs do not have; "
                              f"the {what}s are {sorted(present)}")


# ---- entry point ------------------------------------------------------------------------

def load_inputs(
    splits: Mapping[str, Sequence[str]],
    *,
    class_labels: Sequence[str] = (),
    images: Sequence[str] = (),
    image_encoding: str | None = None,
    channels: int = 3,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(features, {split: examples})`` for ``thresher.prepare``, from local inputs.

    Args:
        splits: ``{split name: [input, ...]}`` (see the module doc for input kinds). All
            splits must use the same kind of input.
        class_labels, images: columns/arrays to treat as class labels / images.
        image_encoding: ``'original'``, ``'png'``, ``'jpeg'`` or ``'none'`` (default:
            ``'original'`` for files: their bytes are kept as they are, a JPEG stays the
            same JPEG; ``'none'`` for arrays).
        channels: channels of images read from files (1, 3 or 4).
    """
    if not splits:
        raise ConfigError("no splits given")
    splits = {name: [_expand(i) for i in items] for name, items in splits.items()}
    kinds = {name: {_kind(i) for i in items} for name, items in splits.items()}
    all_kinds = set().union(*kinds.values())
    if len(all_kinds) != 1 or any(not items for items in splits.values()):
        raise ConfigError(f"every split needs inputs of one kind, got {kinds}")
    kind = all_kinds.pop()
    if kind == "arrays":
        arrays = {name: _load_arrays(items) for name, items in splits.items()}
        _check_named(class_labels, images, {k for a in arrays.values() for k in a}, "array")
        features = array_features(arrays, set(class_labels), set(images), image_encoding)
        return features, dict(arrays)
    if kind == "folder":
        if any(len(items) != 1 for items in splits.values()):
            raise ConfigError("give one image folder per split")
        scans = {name: _scan_folder(items[0]) for name, items in splits.items()}
        names = sorted({c for scan in scans.values() for _, c, _ in scan})
        features = {"image": Image((None, None, channels), encoding=image_encoding or "original"),
                    "label": ClassLabel(names=names), "filename": Text()}
        examples = {name: [{"image": p, "label": c, "filename": rel} for p, c, rel in scan]
                    for name, scan in scans.items()}
        return features, examples
    tables: dict[str, list[dict[str, Any]]] = {}
    for name, items in splits.items():
        rows: list[dict[str, Any]] = []
        for item in items:
            table = _read_table(item)
            for key in images:
                base = os.path.dirname(os.path.abspath(item))
                for r in table:
                    if isinstance(r.get(key), str):
                        r[key] = os.path.join(base, r[key])
            rows.extend(table)
        tables[name] = rows
    _check_named(class_labels, images, {k for rows in tables.values() for r in rows for k in r}, "column")
    try:
        features = _table_features(tables, set(class_labels), set(images), image_encoding,
                                   channels)
    except FeatureError as e:
        raise ConfigError(str(e)) from None
    return features, tables
