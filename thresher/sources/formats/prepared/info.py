"""DatasetInfo, SplitInfo, SplitDict: the contents of ``dataset_info.json``.

``info.splits["train"]`` is a split's SplitInfo; ``info.splits["train[:75%]"]`` (or any
split expression) is a SubSplitInfo with ``num_examples`` and the records it reads.

Example:
    >>> from thresher.sources.formats.prepared.info import SplitDict, SplitInfo
    >>> splits = SplitDict([SplitInfo("train", (30, 30)), SplitInfo("test", (10,))])
    >>> list(splits.keys()), splits["train"].num_examples, splits["train[:75%]"].num_examples
    (['train', 'test'], 60, 45)
    >>> splits["all"].num_examples, splits.total_num_examples
    (70, 70)
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from thresher._validate import is_int, user_path
from thresher.errors import DatasetInfoError, FeatureError, SourceNotFoundError, SplitError
from thresher.features import RECORD_VERSION, Feature, as_feature, feature_from_json
from thresher.sources.formats.prepared.layout import (
    DATASET_NAME_RE,
    FORMAT,
    FORMAT_VERSION,
    INFO_FILE,
    PathLike,
    shard_filename,
)
from thresher.sources.remote.fs import is_url, join, read_bytes
from thresher.splits import AbsoluteInstruction, SplitArg, check_split_name, resolve_split
from thresher.splits.base import SplitSizes

__all__ = ["DatasetInfo", "FileInstruction", "SplitDict", "SplitInfo", "SubSplitInfo", "features_digest"]

_DIGEST_PREFIX = "blake2b-128:"


def features_digest(features_json: Any) -> str:
    """The digest ``dataset_info.json`` stores of its ``features`` entry (canonical JSON).

    Example:
        >>> from thresher.features import Scalar
        >>> features_digest(Scalar("int64").to_json()) == features_digest({"dtype": "int64", "type": "Scalar"})
        True
        >>> features_digest(Scalar("int64").to_json()) == features_digest(Scalar("float64").to_json())
        False
    """
    text = json.dumps(features_json, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return _DIGEST_PREFIX + hashlib.blake2b(text.encode("ascii"), digest_size=16).hexdigest()


@dataclasses.dataclass(frozen=True)
class FileInstruction:
    """Read ``take`` records of shard file ``filename`` after skipping ``skip``."""

    filename: str
    skip: int
    take: int


@dataclasses.dataclass(frozen=True)
class SplitInfo(SplitSizes):
    """One split: its name, records per shard file (``num_examples``, ``num_shards``
    from SplitSizes), and bytes on disk."""

    num_bytes: int = 0
    dataset_name: str = "dataset"

    @property
    def filenames(self) -> list[str]:
        """The shard file names (relative to the dataset directory), in order."""
        n = self.num_shards
        return [shard_filename(self.dataset_name, self.name, i, n) for i in range(n)]

    def file_instructions(self, instruction: AbsoluteInstruction) -> list[FileInstruction]:
        """The shard ranges that hold records ``[instruction.from_, instruction.to)``."""
        out, start = [], 0
        for filename, length in zip(self.filenames, self.shard_lengths, strict=False):
            lo, hi = max(instruction.from_, start), min(instruction.to, start + length)
            if lo < hi:
                out.append(FileInstruction(filename, lo - start, hi - lo))
            start += length
        return out

    def __repr__(self) -> str:
        return f"<SplitInfo num_examples={self.num_examples}, num_shards={self.num_shards}>"


class SubSplitInfo:
    """What a split expression reads: ``num_examples``, absolute ranges, file ranges."""

    def __init__(self, split: str, instructions: list[AbsoluteInstruction],
                 file_instructions: list[FileInstruction]) -> None:
        self.split = split
        self.instructions = instructions
        self.file_instructions = file_instructions

    @property
    def num_examples(self) -> int:
        return sum(a.num_examples for a in self.instructions)

    @property
    def filenames(self) -> list[str]:
        return sorted({f.filename for f in self.file_instructions})

    def __repr__(self) -> str:
        return f"<SubSplitInfo {self.split!r} num_examples={self.num_examples}>"


class SplitDict(Mapping[str, SplitInfo]):
    """The splits of a dataset by name; also answers any split expression (see module doc)."""

    def __init__(self, splits: Sequence[SplitInfo]) -> None:
        self._splits = {s.name: s for s in splits}

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str) and key in self._splits:
            return self._splits[key]
        if not isinstance(key, str) and not hasattr(key, "to_absolute"):
            raise KeyError(key)
        instructions = resolve_split(key, self._splits)
        files = [f for a in instructions for f in self._splits[a.split].file_instructions(a)]
        return SubSplitInfo(str(key), instructions, files)

    def __iter__(self) -> Iterator[str]:
        return iter(self._splits)

    def __len__(self) -> int:
        return len(self._splits)

    def __contains__(self, key: object) -> bool:
        return key in self._splits

    def resolve(self, split: SplitArg) -> list[AbsoluteInstruction]:
        """The absolute ranges of a split expression (SplitError if it does not fit)."""
        return resolve_split(split, self._splits)

    @property
    def total_num_examples(self) -> int:
        return sum(s.num_examples for s in self._splits.values())

    def __repr__(self) -> str:
        return "{" + ", ".join(f"{k!r}: {v!r}" for k, v in self._splits.items()) + "}"


@dataclasses.dataclass(frozen=True)
class DatasetInfo:
    """The description of a prepared dataset (what ``dataset_info.json`` holds).

    Example:
        >>> from thresher.features import Scalar
        >>> from thresher.sources.formats.prepared.info import DatasetInfo, SplitDict, SplitInfo
        >>> info = DatasetInfo("toy", "1.0.0", "", Scalar("int32"),
        ...                    SplitDict([SplitInfo("train", (4,), 0, "toy")]))
        >>> DatasetInfo.from_json(info.to_json()).splits["train"].num_examples
        4
    """

    name: str
    version: str
    description: str
    features: Feature
    splits: SplitDict
    data_dir: str | None = None
    shuffled: bool = True

    def to_json(self) -> dict[str, Any]:
        features = self.features.to_json()
        return {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "name": self.name,
            "version": self.version,
            "description": self.description,
            "file_format": "array_record",
            "record_encoding": {"name": "thresher.record", "version": RECORD_VERSION},
            "shuffled": self.shuffled,
            "features": features,
            "features_digest": features_digest(features),
            "splits": [{"name": s.name, "num_examples": s.num_examples,
                        "shard_lengths": list(s.shard_lengths), "num_bytes": s.num_bytes}
                       for s in self.splits.values()],
        }

    def dumps(self) -> str:
        """The JSON text written to ``dataset_info.json`` (deterministic)."""
        return json.dumps(self.to_json(), indent=2, ensure_ascii=False) + "\n"

    @classmethod
    def from_json(cls, d: Any, data_dir: str | None = None,
                  where: str = INFO_FILE) -> DatasetInfo:
        """Validates and loads the JSON object; DatasetInfoError says what is wrong."""

        def bad(why: str) -> DatasetInfoError:
            return DatasetInfoError(f"{where}: {why}")

        def field(obj: dict[str, Any], key: str, kind: Any, what: str) -> Any:
            if key not in obj:
                raise bad(f"missing field {key!r}{what}")
            if not isinstance(obj[key], kind) or (isinstance(obj[key], bool) and kind is not bool):
                raise bad(f"field {key!r}{what} has the wrong type: {obj[key]!r}")
            return obj[key]

        if not isinstance(d, dict):
            raise bad("the top level must be a JSON object")
        if d.get("format") != FORMAT:
            raise bad(f"'format' is {d.get('format')!r}, expected {FORMAT!r}: this is not a "
                      "thresher prepared dataset (thresher.data_source and thresher.builder "
                      "also open directories written by TensorFlow Datasets)")
        version = field(d, "format_version", int, "")
        if version > FORMAT_VERSION:
            raise bad(f"format_version {version} is newer than this thresher supports "
                      f"({FORMAT_VERSION}); upgrade thresher")
        encoding = field(d, "record_encoding", dict, "")
        if encoding.get("name") != "thresher.record" or encoding.get("version") != RECORD_VERSION:
            raise bad(f"record_encoding {encoding!r} is not supported (this thresher reads "
                      f"thresher.record version {RECORD_VERSION})")
        if d.get("file_format", "array_record") != "array_record":
            raise bad(f"file_format {d['file_format']!r} is not supported")
        name = field(d, "name", str, "")
        if not DATASET_NAME_RE.fullmatch(name):
            raise bad(f"invalid dataset name {name!r}")
        try:
            features = feature_from_json(field(d, "features", dict, ""))
        except FeatureError as e:
            raise bad(f"bad features: {e}") from None
        _check_features_digest(d, bad)
        splits = []
        for i, s in enumerate(field(d, "splits", list, "")):
            what = f" of splits[{i}]"
            if not isinstance(s, dict):
                raise bad(f"splits[{i}] must be an object")
            split_name = field(s, "name", str, what)
            try:
                check_split_name(split_name)
            except SplitError as e:
                raise bad(str(e)) from None
            lengths = field(s, "shard_lengths", list, what)
            if not lengths or not all(is_int(x, minimum=0) for x in lengths):
                raise bad(f"shard_lengths of split {split_name!r} must be a non-empty list of "
                          f"ints >= 0, got {lengths!r}")
            n = field(s, "num_examples", int, what)
            if n != sum(lengths):
                raise bad(f"split {split_name!r}: num_examples is {n} but its shard_lengths add "
                          f"up to {sum(lengths)}")
            num_bytes = s.get("num_bytes", 0)
            if not is_int(num_bytes, minimum=0):
                raise bad(f"num_bytes of split {split_name!r} must be an int >= 0, got {num_bytes!r}")
            splits.append(SplitInfo(split_name, tuple(lengths), int(num_bytes), name))
        names = [s.name for s in splits]
        if len(set(names)) != len(names):
            raise bad(f"duplicate split names in {names}")
        return cls(name=name, version=str(field(d, "version", str, "")),
                   description=str(d.get("description", "")), features=features,
                   splits=SplitDict(splits), data_dir=data_dir,
                   shuffled=bool(d.get("shuffled", True)))

    @classmethod
    def read(cls, data_dir: PathLike,
             storage_options: Mapping[str, Any] | None = None) -> DatasetInfo:
        """Reads ``data_dir/dataset_info.json`` (``data_dir`` may be a URL)."""
        d = user_path(data_dir)
        path = join(d, INFO_FILE)
        try:
            if is_url(d):
                text = read_bytes(path, storage_options).decode("utf-8")
            else:
                with open(path, encoding="utf-8") as f:
                    text = f.read()
        except FileNotFoundError:
            raise SourceNotFoundError(
                f"{d!r} has no {INFO_FILE}, so it is not a prepared dataset directory "
                "(write one with thresher.prepare() or `thresher prepare`)") from None
        except (OSError, UnicodeDecodeError) as e:
            raise DatasetInfoError(f"cannot read {path!r}: {e}") from None
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as e:
            raise DatasetInfoError(f"{path!r} is not valid JSON ({e}); the file is corrupt or "
                                   "was truncated. Re-create the dataset") from None
        return cls.from_json(obj, data_dir=d, where=path)

    def with_features(self, features: Any) -> DatasetInfo:
        return dataclasses.replace(self, features=as_feature(features))


def _check_features_digest(d: dict[str, Any], bad: Any) -> None:
    """DatasetInfoError when ``features`` no longer matches the ``features_digest`` written
    with the data (a dtype or shape edited afterwards would decode the bytes as other values).
    Directories written before the digest existed have none and are read unchecked."""
    if "features_digest" not in d:
        return
    stored = d["features_digest"]
    if not isinstance(stored, str) or not stored.startswith(_DIGEST_PREFIX):
        raise bad(f"field 'features_digest' is {stored!r}, not a {_DIGEST_PREFIX}... digest")
    if "features" in d and features_digest(d["features"]) != stored:
        raise bad("field 'features' does not match 'features_digest': the feature spec was "
                  "edited after the data was written, and a changed dtype or shape would decode "
                  "the stored bytes as other values. Restore the original dataset_info.json, or "
                  "write the dataset again with thresher.prepare")
