"""The leaves of a feature tree, thresher's or TFDS's, by what a display does with them.

Example:
    >>> import thresher as th
    >>> from thresher.display.fields import fields
    >>> [(f.key, f.kind) for f in fields(th.features.FeaturesDict(
    ...     {"im": th.features.Image((8, 8, 1)), "meta": {"y": th.features.ClassLabel(3)}}))]
    [('im', 'image'), ('meta/y', 'label')]
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from thresher import features as thf
from thresher.sources.formats.tfds import features as tff

__all__ = ["Field", "fields", "get", "label_text"]


@dataclasses.dataclass(frozen=True)
class Field:
    """A leaf feature: its ``/``-joined key, its kind and the feature itself."""

    key: str
    kind: str  # "image", "label", "text", "sequence" or "tensor"
    feature: Any


def _kind(feature: Any) -> str:
    if isinstance(feature, (thf.Image, tff.Image)):
        return "image"
    if isinstance(feature, (thf.ClassLabel, tff.ClassLabel)):
        return "label"
    if isinstance(feature, (thf.Text, tff.Text)):
        return "text"
    if isinstance(feature, tff.Sequence):
        return "sequence"
    return "tensor"


def fields(feature: Any, prefix: str = "") -> list[Field]:
    """The leaves of ``feature`` (a FeaturesDict, either library's), depth first."""
    if isinstance(feature, (Mapping, thf.FeaturesDict)):
        out = []
        for k, v in feature.items():
            out.extend(fields(v, f"{prefix}/{k}" if prefix else k))
        return out
    return [Field(prefix, _kind(feature), feature)]


def get(example: Any, key: str) -> Any:
    """The value at ``a/b`` in a nested example dict."""
    for part in key.split("/"):
        example = example[part]
    return example


def label_text(feature: Any, value: Any) -> str:
    """``'name (id)'`` for a class id, or the id when there are no names."""
    names: list[str] | None = getattr(feature, "names", None)
    i = int(value)
    if names and 0 <= i < len(names) and names[i] != str(i):
        return f"{names[i]} ({i})"
    return str(i)
