"""FeaturesDict: a (nested) mapping of named features; plain dicts convert to it.

Keys are kept sorted: that order is the leaf order of the record encoding and the key
order of decoded examples.

Example:
    >>> from thresher.features import FeaturesDict, Image, ClassLabel
    >>> f = FeaturesDict({"label": ClassLabel(num_classes=10),
    ...                   "image": Image((28, 28, 1), encoding="none")})
    >>> list(f), f["image"].shape, f["label"].num_classes
    (['image', 'label'], (28, 28, 1), 10)
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from thresher.errors import FeatureError
from thresher.features.base import Feature

__all__ = ["FeatureLike", "FeaturesDict", "as_feature"]

FeatureLike = Feature | Mapping[str, Any]


def as_feature(spec: Any) -> Feature:
    """A Feature from a Feature or a (nested) dict of them.

    Example:
        >>> from thresher.features import as_feature, Text
        >>> as_feature({"a": {"b": Text()}})
        FeaturesDict({'a': FeaturesDict({'b': Text()})})
    """
    if isinstance(spec, Feature):
        return spec
    if isinstance(spec, Mapping):
        return FeaturesDict(spec)
    raise FeatureError(f"not a feature: {spec!r}; use thresher.features.Tensor, Scalar, "
                       "ClassLabel, Image, Text or a dict of them")


class FeaturesDict(Feature):
    """Named features; decodes to a dict with the same (sorted) keys."""

    type_name = "FeaturesDict"

    def __init__(self, features: Mapping[str, Any]) -> None:
        if not isinstance(features, Mapping):
            raise FeatureError(f"FeaturesDict expects a dict, got {type(features).__name__}")
        items = {}
        for key in sorted(features, key=lambda k: (not isinstance(k, str), str(k))):
            if not isinstance(key, str) or not key:
                raise FeatureError(f"feature names are non-empty strings, got {key!r}")
            items[key] = as_feature(features[key])
        self._features: dict[str, Feature] = items

    def __getitem__(self, key: str) -> Feature:
        try:
            return self._features[key]
        except KeyError:
            raise KeyError(f"no feature {key!r}; the features are {list(self._features)}") from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._features)

    def __len__(self) -> int:
        return len(self._features)

    def __contains__(self, key: object) -> bool:
        return key in self._features

    def keys(self) -> Any:
        return self._features.keys()

    def items(self) -> Any:
        return self._features.items()

    def values(self) -> Any:
        return self._features.values()

    def __repr__(self) -> str:
        return f"FeaturesDict({self._features!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FeaturesDict) and self._features == other._features

    def __hash__(self) -> int:
        return hash(tuple(self._features))

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type_name,
                "features": {k: f.to_json() for k, f in self._features.items()}}

    def encode_payload(self, value: Any, where: str = "value") -> bytes:
        raise FeatureError("a FeaturesDict is not a leaf; encode examples with "
                           "thresher.features.RecordCodec")

    def decode_payload(self, buf: bytes, offset: int, length: int) -> Any:
        raise FeatureError("a FeaturesDict is not a leaf; decode records with "
                           "thresher.features.RecordCodec")
