"""The metadata of a TFDS-written dataset directory: ``dataset_info.json``, ``features.json``.

TFDS writes its DatasetInfo proto as JSON (camelCase names, 64-bit ints as strings):
``name``, ``version``, ``fileFormat`` (``tfrecord`` when absent), ``splits`` with
``shardLengths`` and ``filepathTemplate``, ``supervisedKeys``; the feature tree is in
``features.json`` (older versions put it in ``dataset_info.json`` as ``features``) and
ClassLabel names in ``<feature>.labels.txt``.

Example:
    >>> from thresher.sources.formats.tfds.info import shard_filenames
    >>> shard_filenames("{DATASET}-{SPLIT}.{FILEFORMAT}-{SHARD_X_OF_Y}", "mnist", "test",
    ...                 "array_record", 2)
    ['mnist-test.array_record-00000-of-00002', 'mnist-test.array_record-00001-of-00002']
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import string
from collections.abc import Mapping
from typing import Any, cast

from thresher._validate import user_path
from thresher.errors import DatasetInfoError, FeatureError, SourceError, SourceNotFoundError, SplitError
from thresher.sources.formats.prepared.info import SplitDict, SplitInfo
from thresher.sources.formats.tfds.features import TfdsFeature, feature_from_tfds_json, load_label_names
from thresher.sources.formats.tfds.files import DatasetDir
from thresher.sources.paths import inside
from thresher.sources.remote.fs import is_url
from thresher.splits import check_split_name

__all__ = [
    "DEFAULT_TEMPLATE",
    "FILE_FORMATS",
    "TfdsInfo",
    "TfdsSplitInfo",
    "is_tfds_dir",
    "shard_filenames",
    "version_dir",
]

INFO_FILE = "dataset_info.json"
FEATURES_FILE = "features.json"
DEFAULT_TEMPLATE = "{DATASET}-{SPLIT}.{FILEFORMAT}-{SHARD_X_OF_Y}"
FILE_FORMATS = ("tfrecord", "array_record")
_TEMPLATE_VARS = {"DATASET", "SPLIT", "FILEFORMAT", "SHARD_INDEX", "NUM_SHARDS", "SHARD_X_OF_Y"}
_VERSION_RE = re.compile(r"\d+\.\d+\.\d+")


def _template_vars(template: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(template) if name}


def shard_filenames(template: str, dataset: str, split: str, file_format: str,
                    num_shards: int) -> list[str]:
    """The shard file names TFDS's template gives (shard numbers padded to 5 digits)."""
    width = max(len(str(num_shards)), 5)
    out = []
    for i in range(num_shards):
        idx, num = f"{i:0{width}d}", f"{num_shards:0{width}d}"
        out.append(template.format(DATASET=dataset, SPLIT=split, FILEFORMAT=file_format,
                                   SHARD_INDEX=idx, NUM_SHARDS=num, SHARD_X_OF_Y=f"{idx}-of-{num}"))
    return out


@dataclasses.dataclass(frozen=True)
class TfdsSplitInfo(SplitInfo):
    """A split of a TFDS dataset; its shard files follow ``template``."""

    template: str = DEFAULT_TEMPLATE
    file_format: str = "array_record"

    @property
    def filenames(self) -> list[str]:
        return shard_filenames(self.template, self.dataset_name, self.name, self.file_format,
                               self.num_shards)


def is_tfds_dir(path: str, storage_options: Mapping[str, Any] | None = None) -> bool:
    """True if ``path`` (a directory or URL, or its newest version directory) holds a
    TFDS-written dataset."""
    d = version_dir(path, strict=False, storage_options=storage_options)
    if d is None:
        return False
    try:
        obj = json.loads(DatasetDir(d, storage_options).read_bytes(INFO_FILE))
    except (OSError, ValueError, SourceError):
        return False
    return isinstance(obj, dict) and "format" not in obj and isinstance(obj.get("splits"), list)


def version_dir(path: str, strict: bool = True,
                storage_options: Mapping[str, Any] | None = None) -> str | None:
    """``path`` if it holds ``dataset_info.json``, else its newest ``X.Y.Z`` subdirectory
    that does (None, or SourceNotFoundError when ``strict``, if there is none). ``path``
    may be a URL (``gs://bucket/tensorflow_datasets/mnist``)."""
    top = DatasetDir(path, storage_options)
    if top.has(INFO_FILE):
        return top.path
    versions = sorted((v for v in top.names() if _VERSION_RE.fullmatch(v)),
                      key=lambda v: tuple(int(x) for x in v.split(".")), reverse=True)
    for v in versions:  # the newest that is complete (an unfinished one has no info file)
        if top.sub(v).has(INFO_FILE):
            return top.join(v)
    if strict:
        raise SourceNotFoundError(
            f"{path!r} has no {INFO_FILE} and no version subdirectory (such as 1.0.0/) with "
            "one: give a TFDS dataset directory (~/tensorflow_datasets/<name>/ or "
            "<name>/<config>/, or its URL) or one of its version directories")
    return None


def _int(value: Any, what: str, bad: Any) -> int:
    try:
        n = int(value)
    except (TypeError, ValueError):
        raise bad(f"{what} is not an integer: {value!r}") from None
    if n < 0:
        raise bad(f"{what} is negative: {n}")
    return n


@dataclasses.dataclass(frozen=True)
class TfdsInfo:
    """What a TFDS dataset directory describes (the part thresher reads).

    ``info.features``, ``info.splits["train"].num_examples``, ``info.splits["train[:10%]"]``,
    ``info.file_format``, ``info.supervised_keys``; ``info.raw`` is the JSON as read.
    See :func:`thresher.builder` for an example.
    """

    name: str
    version: str
    description: str
    features: TfdsFeature
    splits: SplitDict
    data_dir: str
    file_format: str
    alternative_file_formats: tuple[str, ...] = ()
    supervised_keys: tuple[str, ...] | None = None
    config_name: str = ""
    raw: dict[str, Any] = dataclasses.field(default_factory=dict, repr=False, compare=False)

    @property
    def full_name(self) -> str:
        """``name/config/version`` (``name/version`` without a config)."""
        return "/".join(p for p in (self.name, self.config_name, self.version) if p)

    @property
    def tfds_splits(self) -> list[TfdsSplitInfo]:
        """The splits, in dataset order."""
        return [cast(TfdsSplitInfo, s) for s in self.splits.values()]

    @property
    def has_array_record(self) -> bool:
        """Whether the shards exist as ArrayRecord files (random access)."""
        return "array_record" in (self.file_format, *self.alternative_file_formats)

    @classmethod
    def read(cls, path: str, storage_options: Mapping[str, Any] | None = None) -> TfdsInfo:
        """Reads a TFDS version directory (or the newest version of a dataset directory);
        ``path`` may be a URL, read with fsspec and ``storage_options``."""
        text = user_path(path)
        d = version_dir(text if is_url(text) else os.path.abspath(text),
                        storage_options=storage_options)
        assert d is not None
        files = DatasetDir(d, storage_options)
        info_path = files.join(INFO_FILE)

        def bad(why: str) -> DatasetInfoError:
            return DatasetInfoError(f"{info_path}: {why}")

        obj = _load_json(files, INFO_FILE, bad)
        if not isinstance(obj, dict):
            raise bad("the top level must be a JSON object")
        name = obj.get("name")
        if not isinstance(name, str) or not name:
            raise bad("missing dataset 'name'")
        file_format = obj.get("fileFormat") or "tfrecord"
        alternatives = tuple(str(f) for f in obj.get("alternativeFileFormats") or ())
        if file_format not in FILE_FORMATS and not set(alternatives) & set(FILE_FORMATS):
            raise bad(f"fileFormat {file_format!r} is not one thresher reads ({FILE_FORMATS}); "
                      "the dataset was written by a newer or differently configured TFDS. "
                      "Re-generate it with file_format='array_record'")
        readable = "array_record" if "array_record" in (file_format, *alternatives) else (
            "tfrecord")
        splits = [_split(s, i, name, readable, bad, (d, info_path)) for i, s in
                  enumerate(obj.get("splits") or [])]
        if len({s.name for s in splits}) != len(splits):
            raise bad(f"duplicate split names in {[s.name for s in splits]}")
        features = _features(files, obj, bad)
        keys = _supervised_keys(obj.get("supervisedKeys"))
        return cls(name=name, version=str(obj.get("version", "")),
                   description=str(obj.get("description", "")), features=features,
                   splits=SplitDict(splits), data_dir=d, file_format=str(file_format),
                   alternative_file_formats=alternatives, supervised_keys=keys,
                   config_name=str(obj.get("configName", "")), raw=obj)


def _load_json(files: DatasetDir, name: str, bad: Any) -> Any:
    try:
        return json.loads(files.read_text(name))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise bad(f"cannot be read as JSON ({e}); the file is corrupt or truncated") from None
    except SourceError:
        raise
    except OSError as e:
        raise bad(f"cannot be read ({e})") from None


def _split(s: Any, i: int, dataset: str, file_format: str, bad: Any,
           where: tuple[str, str]) -> TfdsSplitInfo:
    if not isinstance(s, dict):
        raise bad(f"splits[{i}] must be an object")
    name = s.get("name")
    try:
        check_split_name(name)
    except SplitError as e:
        raise bad(f"splits[{i}]: {e}") from None
    if "shardLengths" not in s:
        if int(s.get("numShards", 0) or 0) > 0 or s.get("statistics"):
            raise bad(f"split {name!r} has no 'shardLengths' (written by a newer or much older "
                      "TFDS, which thresher does not read); regenerate it with a current TFDS")
        lengths: tuple[int, ...] = ()
    else:
        lengths = tuple(_int(x, f"split {name!r} shardLengths", bad) for x in s["shardLengths"])
    template = str(s.get("filepathTemplate") or DEFAULT_TEMPLATE)
    unknown = _template_vars(template) - _TEMPLATE_VARS
    if unknown:
        raise bad(f"split {name!r}: filepathTemplate {template!r} uses {sorted(unknown)}, which "
                  "this thresher does not know (a newer TFDS wrote it); upgrade thresher")
    for fmt in FILE_FORMATS:  # shard names differ only in digits, which cannot climb out
        for shard in shard_filenames(template, dataset, str(name), fmt, max(len(lengths), 1))[:1]:
            inside(where[0], shard, f"splits[{i}] (split {name!r}) filepathTemplate "
                                    f"{template!r}", where[1])
    return TfdsSplitInfo(str(name), lengths, _int(s.get("numBytes", 0), "numBytes", bad), dataset,
                         template, file_format)


def _features(files: DatasetDir, obj: dict[str, Any], bad: Any) -> TfdsFeature:
    path = files.join(FEATURES_FILE)
    if files.has(FEATURES_FILE):
        spec = _load_json(files, FEATURES_FILE, lambda why: DatasetInfoError(f"{path}: {why}"))
    elif isinstance(obj.get("features"), dict):
        spec = obj["features"]
    else:
        raise bad(f"no {FEATURES_FILE} beside it and no 'features' in it: the feature "
                  "description is missing")
    try:
        features = feature_from_tfds_json(spec, files.path)
    except DatasetInfoError as e:
        raise DatasetInfoError(f"{e} (in {path})") from None
    except FeatureError as e:
        raise FeatureError(f"{e} (in {path})") from None
    load_label_names(features, files)
    return features


def _supervised_keys(obj: Any) -> tuple[str, ...] | None:
    if not isinstance(obj, dict):
        return None
    if "input" in obj and "output" in obj:
        return (str(obj["input"]), str(obj["output"]))
    items = (obj.get("tuple") or {}).get("items")
    if isinstance(items, list):
        keys = [it.get("featureKey") for it in items if isinstance(it, dict)]
        if all(isinstance(k, str) for k in keys):
            return tuple(str(k) for k in keys)
    return None
