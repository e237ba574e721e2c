"""Datasets written by TensorFlow Datasets, read without TensorFlow.

``thresher.data_source(dir, split=...)`` and ``thresher.builder(dir).info`` open a TFDS
version directory (or a dataset directory: its newest version); records are
``tf.train.Example`` protos decoded (:mod:`~thresher.sources.tfds.wire`,
:mod:`~thresher.sources.tfds.decode`) to what ``tfds.data_source`` returns. tfrecord
datasets are converted to ArrayRecord with ``thresher convert``
(:mod:`~thresher.sources.tfds.convert`). The guide is ``docs/tfds.md``.

Example:
    >>> from thresher.sources.tfds import shard_filenames
    >>> shard_filenames("{DATASET}-{SPLIT}.{FILEFORMAT}-{SHARD_X_OF_Y}", "mnist", "train",
    ...                 "tfrecord", 1)
    ['mnist-train.tfrecord-00000-of-00001']
"""

from thresher.sources.tfds.decode import TfdsCodec
from thresher.sources.tfds.info import TfdsInfo, TfdsSplitInfo, is_tfds_dir, shard_filenames
from thresher.sources.tfds.reader import TfdsBuilder
from thresher.sources.tfds.source import TfdsSource

__all__ = ["TfdsBuilder", "TfdsCodec", "TfdsInfo", "TfdsSource", "TfdsSplitInfo", "is_tfds_dir",
           "shard_filenames"]
