"""Features to and from their JSON form (the ``features`` entry of ``dataset_info.json``).

Example:
    >>> from thresher.features import ClassLabel, feature_from_json
    >>> feature_from_json(ClassLabel(names=["a", "b"]).to_json())
    ClassLabel(num_classes=2, names=['a', 'b'])
"""

from __future__ import annotations

from typing import Any

from thresher.errors import FeatureError
from thresher.features.base import Feature
from thresher.features.class_label import ClassLabel
from thresher.features.features_dict import FeaturesDict
from thresher.features.image import Image
from thresher.features.tensor import Scalar, Tensor
from thresher.features.text import Text

__all__ = ["feature_from_json"]


def _field(d: dict[str, Any], key: str, where: str) -> Any:
    if key not in d:
        raise FeatureError(f"{where}: missing field {key!r} in {d!r}")
    return d[key]


def feature_from_json(d: Any, where: str = "features") -> Feature:
    """Rebuilds a feature from :meth:`Feature.to_json` output; FeatureError if malformed."""
    if not isinstance(d, dict):
        raise FeatureError(f"{where}: a feature is a JSON object, got {d!r}")
    kind = _field(d, "type", where)
    if kind == "FeaturesDict":
        children = _field(d, "features", where)
        if not isinstance(children, dict):
            raise FeatureError(f"{where}: 'features' must be an object")
        return FeaturesDict({k: feature_from_json(v, f"{where}/{k}") for k, v in children.items()})
    try:
        leaf = _leaf(d, kind, where)
    except FeatureError as e:
        message = str(e)
        raise FeatureError(message if message.startswith(where) else f"{where}: {message}") from None
    if leaf is not None:
        return leaf
    raise FeatureError(f"{where}: unknown feature type {kind!r} (this thresher knows "
                       "Tensor, Scalar, ClassLabel, Image, Text, FeaturesDict)")


def _leaf(d: dict[str, Any], kind: Any, where: str) -> Feature | None:
    """The leaf feature ``d`` describes (None for an unknown ``kind``)."""
    if kind == "Tensor":
        shape = _field(d, "shape", where)
        if not isinstance(shape, list):
            raise FeatureError(f"{where}: 'shape' must be a list")
        return Tensor(tuple(shape), _field(d, "dtype", where))
    if kind == "Scalar":
        return Scalar(_field(d, "dtype", where))
    if kind == "ClassLabel":
        return ClassLabel(num_classes=d.get("num_classes"), names=d.get("names"))
    if kind == "Image":
        shape = _field(d, "shape", where)
        if not isinstance(shape, list) or d.get("dtype", "uint8") != "uint8":
            raise FeatureError(f"{where}: bad Image {d!r}")
        return Image(tuple(shape), encoding=_field(d, "encoding", where))
    if kind == "Text":
        return Text()
    return None
