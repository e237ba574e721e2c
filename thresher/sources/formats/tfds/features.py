"""TFDS feature descriptions (``features.json``), read without tensorflow-datasets.

A TFDS feature tree is a ``FeaturesDict`` of leaves (``Tensor``, ``Scalar``,
``ClassLabel``, ``Text``, ``Image``, ``Audio``, ``BBoxFeature``) and ``Sequence``
wrappers (``Video`` is a Sequence of Images). :func:`feature_from_tfds_json` builds it
from TFDS's JSON (the ``pythonClassName`` + content form). The classes only describe;
decoding records to what ``tfds.data_source`` returns is :mod:`thresher.sources.formats.tfds.decode`.

Example:
    >>> from thresher.sources.formats.tfds.features import feature_from_tfds_json
    >>> spec = {"pythonClassName": "tensorflow_datasets.core.features.features_dict.FeaturesDict",
    ...         "featuresDict": {"features": {"label": {
    ...             "pythonClassName":
    ...                 "tensorflow_datasets.core.features.class_label_feature.ClassLabel",
    ...             "classLabel": {"numClasses": "10"}}}}}
    >>> feature_from_tfds_json(spec, "mnist")
    FeaturesDict({'label': ClassLabel(num_classes=10)})
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any, Protocol

import numpy as np

from thresher.errors import DatasetInfoError, FeatureError
from thresher.sources.paths import outside_reason

__all__ = [
    "ClassLabel",
    "FeaturesDict",
    "Image",
    "Sequence",
    "Shape",
    "Tensor",
    "Text",
    "TfdsFeature",
    "feature_from_tfds_json",
    "load_label_names",
]

Shape = tuple[int | None, ...]
_PREFIX = "tensorflow_datasets.core.features."
# TFDS's dtype names in features.json -> NumPy (strings are "string"/"object"/"str")
_STRINGS = ("string", "str", "object", "bytes")


class TfdsFeature:
    """Base of the TFDS feature descriptions (see module doc)."""

    tfds_class: str = "Feature"


class Tensor(TfdsFeature):
    """A tensor leaf: ``Tensor``, ``Scalar``, ``Audio`` (raw samples) or ``BBoxFeature``.

    ``encoding`` is ``'none'``, ``'bytes'`` or ``'zlib'`` (stored as one bytes value).
    """

    def __init__(self, shape: Shape, dtype: str, encoding: str = "none",
                 tfds_class: str = "Tensor", **extra: Any) -> None:
        self.shape = shape
        self.dtype = dtype
        self.encoding = encoding.lower()
        self.tfds_class = tfds_class
        self.extra = extra
        if self.encoding not in ("none", "bytes", "zlib"):
            raise FeatureError(f"{tfds_class}: unknown tensor encoding {encoding!r}")

    @property
    def is_string(self) -> bool:
        return self.dtype in _STRINGS

    @property
    def np_dtype(self) -> np.dtype:
        return np.dtype(object) if self.is_string else np.dtype(self.dtype)

    def __repr__(self) -> str:
        if self.tfds_class == "Scalar" or (self.tfds_class == "Tensor" and not self.shape
                                           and self.encoding == "none"):
            return f"Scalar(dtype={self.dtype})"
        enc = "" if self.encoding == "none" else f", encoding={self.encoding}"
        return f"{self.tfds_class}(shape={self.shape}, dtype={self.dtype}{enc})"


class ClassLabel(Tensor):
    """A class id (int64) with ``num_classes`` and, when TFDS saved them, ``names``."""

    def __init__(self, num_classes: int, names: list[str] | None = None) -> None:
        super().__init__((), "int64", tfds_class="ClassLabel")
        self.num_classes = num_classes
        self.names = names

    def int2str(self, i: int) -> str:
        """The name of class ``i`` (its number as text when there are no names)."""
        return self.names[i] if self.names else str(i)

    def __repr__(self) -> str:
        return f"ClassLabel(num_classes={self.num_classes})"


class Text(TfdsFeature):
    """A string, stored as bytes; TFDS's data source returns it as ``bytes``."""

    tfds_class = "Text"

    def __repr__(self) -> str:
        return "Text(shape=(), dtype=string)"


class Image(TfdsFeature):
    """A PNG or JPEG image decoded to ``(height, width, channels)``."""

    tfds_class = "Image"

    def __init__(self, shape: Shape, dtype: str = "uint8", encoding: str = "png") -> None:
        if dtype not in ("uint8", "uint16"):
            raise FeatureError(f"Image features of dtype {dtype!r} are not supported (uint8 "
                               "and uint16 are)")
        self.shape = shape
        self.dtype = dtype
        self.encoding = encoding or "png"

    @property
    def channels(self) -> int:
        last = self.shape[-1] if self.shape else None
        return 3 if last is None else int(last)

    def __repr__(self) -> str:
        return f"Image(shape={self.shape}, dtype={self.dtype})"


class Sequence(TfdsFeature):
    """A variable (``length=None``) or fixed length sequence of a feature."""

    def __init__(self, feature: TfdsFeature, length: int | None,
                 tfds_class: str = "Sequence") -> None:
        self.feature = feature
        self.length = length
        self.tfds_class = tfds_class

    def __repr__(self) -> str:
        if self.tfds_class == "Video" and isinstance(self.feature, Image):
            return f"Video(Image(shape={(self.length, *self.feature.shape)}))"
        return f"Sequence({self.feature!r}, length={self.length})"


class FeaturesDict(TfdsFeature, Mapping[str, TfdsFeature]):
    """A dict of features (nested dicts allowed)."""

    tfds_class = "FeaturesDict"

    def __init__(self, features: Mapping[str, TfdsFeature]) -> None:
        self._features = dict(features)

    def __getitem__(self, key: str) -> TfdsFeature:
        return self._features[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._features)

    def __len__(self) -> int:
        return len(self._features)

    def __repr__(self) -> str:
        inner = ", ".join(f"{k!r}: {v!r}" for k, v in self._features.items())
        return f"FeaturesDict({{{inner}}})"


def _shape(obj: Any, bad: Any) -> Shape:
    try:
        return tuple(None if int(d) < 0 else int(d) for d in (obj or {}).get("dimensions", []))
    except (AttributeError, TypeError, ValueError):
        raise DatasetInfoError(str(bad(f"shape {obj!r} is not a list of integer dimensions"))) from None


def _dtype(dtype: str, bad: Any) -> str:
    """``dtype`` if NumPy knows it (or it is a string type); else DatasetInfoError naming the feature."""
    if dtype not in _STRINGS:
        try:
            np.dtype(dtype)
        except (TypeError, ValueError, SyntaxError):
            raise DatasetInfoError(str(bad(f"dtype {dtype!r} is not a dtype NumPy knows; the "
                                           "features description was edited or damaged"))) from None
    return dtype


def _tensor(kind: str) -> Callable[[dict[str, Any], Any], TfdsFeature]:
    def build(content: dict[str, Any], bad: Any) -> TfdsFeature:
        extra = {k: v for k, v in content.items() if k not in ("shape", "dtype", "encoding")}
        return Tensor(_shape(content.get("shape"), bad), _dtype(str(content.get("dtype", "float32")), bad),
                      str(content.get("encoding", "none")), kind, **extra)
    return build


def _image(content: dict[str, Any], bad: Any) -> TfdsFeature:
    return Image(_shape(content.get("shape"), bad), str(content.get("dtype", "uint8")),
                 str(content.get("encodingFormat", "png")))


def _video(content: dict[str, Any], bad: Any) -> TfdsFeature:
    shape = _shape(content.get("shape"), bad)
    if len(shape) != 4:
        raise bad(f"Video shape {shape} is not (frames, height, width, channels)")
    fmt = str(content.get("encodingFormat", "png"))
    return Sequence(Image(shape[1:], str(content.get("dtype", "uint8")), fmt), shape[0], "Video")


def _class_label(content: dict[str, Any], bad: Any) -> TfdsFeature:
    return ClassLabel(int(content.get("numClasses", 0)))


def _audio(content: dict[str, Any], bad: Any) -> TfdsFeature:
    if content.get("fileFormat"):
        raise bad(f"Audio stored as {content['fileFormat']!r} files needs an audio decoder; "
                  "only raw-sample Audio features (no file_format) are supported")
    return _tensor("Audio")(content, bad)


# JSON content key and builder, by TFDS class name
_BUILDERS: dict[str, tuple[str, Callable[[dict[str, Any], Any], TfdsFeature]]] = {
    "tensor_feature.Tensor": ("tensor", _tensor("Tensor")),
    "scalar.Scalar": ("tensor", _tensor("Scalar")),
    "class_label_feature.ClassLabel": ("classLabel", _class_label),
    "text_feature.Text": ("text", lambda c, bad: Text()),
    "image_feature.Image": ("image", _image),
    "video_feature.Video": ("video", _video),
    "audio_feature.Audio": ("audio", _audio),
    "bounding_boxes.BBoxFeature": ("boundingBox", _tensor("BBoxFeature")),
}


def feature_from_tfds_json(obj: Any, dataset: str, path: str = "") -> TfdsFeature:
    """The feature tree of TFDS's ``features.json``; FeatureError names unknown types.

    ``dataset`` (a name or directory) and ``path`` (the feature's key) go in errors.
    """
    where = f"feature {path!r} of TFDS dataset {dataset!r}" if path else (
        f"the features of TFDS dataset {dataset!r}")

    def bad(why: str) -> FeatureError:
        return FeatureError(f"{where}: {why}")

    if not isinstance(obj, dict) or not isinstance(obj.get("pythonClassName"), str):
        raise bad(f"expected an object with 'pythonClassName', got {str(obj)[:200]!r}")
    cls = obj["pythonClassName"]
    short = cls[len(_PREFIX):] if cls.startswith(_PREFIX) else cls
    if short == "features_dict.FeaturesDict":
        children = (obj.get("featuresDict") or {}).get("features", {})
        return FeaturesDict({k: feature_from_tfds_json(v, dataset, f"{path}/{k}".lstrip("/"))
                             for k, v in children.items()})
    if short == "sequence_feature.Sequence":
        content = obj.get("sequence") or {}
        length = int(content.get("length", -1))
        inner = feature_from_tfds_json(content.get("feature"), dataset, path)
        return Sequence(inner, None if length < 0 else length)
    if short not in _BUILDERS:
        raise bad(f"the feature type {cls!r} is not supported by thresher (supported: "
                  + ", ".join(sorted(k.split(".")[-1] for k in _BUILDERS))
                  + ", FeaturesDict, Sequence); read this dataset with tensorflow-datasets")
    key, build = _BUILDERS[short]
    content = obj.get(key)
    if not isinstance(content, dict):
        raise bad(f"{short.split('.')[-1]} has no {key!r} description (written by another "
                  "TFDS version?)")
    return build(content, bad)


class _TextFiles(Protocol):
    def has(self, name: str) -> bool: ...

    def read_text(self, name: str) -> str: ...


def _label_file(name: str) -> bool:
    """True; DatasetInfoError when the feature name makes a label file outside the directory."""
    why = outside_reason(f"{name}.labels.txt")
    if why is not None:
        raise DatasetInfoError(f"the label file of ClassLabel feature {name!r} would be "
                               f"{name + '.labels.txt'!r}, outside the dataset directory ({why}); "
                               "the features description was edited or damaged")
    return True


def load_label_names(feature: TfdsFeature, files: _TextFiles, name: str = "") -> None:
    """Reads ``<name>.labels.txt`` files (nested names joined by ``-``) into ClassLabels.

    ``files`` is the dataset directory (a :class:`~thresher.sources.formats.tfds.files.DatasetDir`).
    """
    if isinstance(feature, FeaturesDict):
        for key, child in feature.items():
            load_label_names(child, files, f"{name}-{key}" if name else key)
    elif isinstance(feature, Sequence):
        load_label_names(feature.feature, files, name)
    elif isinstance(feature, ClassLabel) and _label_file(name) and files.has(f"{name}.labels.txt"):
        text = files.read_text(f"{name}.labels.txt")
        feature.names = [n.strip() for n in text.split("\n") if n.strip()]
