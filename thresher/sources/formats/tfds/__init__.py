"""Datasets written by TensorFlow Datasets, read without TensorFlow.

``thresher.data_source(dir, split=...)`` and ``thresher.builder(dir).info`` open a TFDS
version directory (or a dataset directory: its newest version); records are
``tf.train.Example`` protos decoded (:mod:`~thresher.sources.formats.tfds.wire`,
:mod:`~thresher.sources.formats.tfds.decode`) to what ``tfds.data_source`` returns. tfrecord
datasets are converted to ArrayRecord with ``thresher convert``
(:mod:`~thresher.sources.formats.tfds.convert`). The guide is ``docs/tfds.md``.

Example:
    >>> from thresher.sources.formats.tfds import shard_filenames
    >>> shard_filenames("{DATASET}-{SPLIT}.{FILEFORMAT}-{SHARD_X_OF_Y}", "mnist", "train",
    ...                 "tfrecord", 1)
    ['mnist-train.tfrecord-00000-of-00001']
"""

from thresher.sources.formats.tfds.decode import TfdsCodec
from thresher.sources.formats.tfds.info import TfdsInfo, TfdsSplitInfo, is_tfds_dir, shard_filenames
from thresher.sources.formats.tfds.reader import TfdsBuilder
from thresher.sources.formats.tfds.source import TfdsSource

__all__ = ["TfdsBuilder", "TfdsCodec", "TfdsInfo", "TfdsSource", "TfdsSplitInfo", "is_tfds_dir",
           "shard_filenames"]
