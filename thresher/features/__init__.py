"""Features: what the fields of an example are, and how they are stored in records.

``Tensor(shape, dtype)``, ``Scalar(dtype)``, ``ClassLabel(num_classes= or names=)``,
``Image(shape, encoding='png'|'jpeg'|'none')``, ``Text()`` and (nested) dicts of them
(``FeaturesDict``). Records decode to NumPy: arrays, NumPy scalars and ``str``.
The record encoding is described in :mod:`thresher.features.codec`.

Example:
    >>> import numpy as np
    >>> from thresher import features as tf
    >>> codec = tf.RecordCodec({"x": tf.Tensor((3,), "float32"), "name": tf.Text()})
    >>> codec.decode(codec.encode({"x": np.arange(3), "name": "abc"}))
    {'name': 'abc', 'x': array([0., 1., 2.], dtype=float32)}
"""

from thresher.features.base import Feature
from thresher.features.class_label import ClassLabel
from thresher.features.codec import RECORD_VERSION, RecordCodec
from thresher.features.features_dict import FeaturesDict, as_feature
from thresher.features.image import Image
from thresher.features.serialization import feature_from_json
from thresher.features.tensor import Scalar, Tensor
from thresher.features.text import Text

__all__ = [
    "RECORD_VERSION",
    "ClassLabel",
    "Feature",
    "FeaturesDict",
    "Image",
    "RecordCodec",
    "Scalar",
    "Tensor",
    "Text",
    "as_feature",
    "feature_from_json",
]
