"""The earlier import path of the TFDS reader, kept: it moved to :mod:`thresher.sources.formats.tfds`.

``thresher.sources.tfds`` and ``thresher.sources.tfds.convert`` (named in earlier guides)
give the same objects as their new homes; new code imports from
``thresher.sources.formats.tfds``.

Example:
    >>> from thresher.sources import tfds
    >>> from thresher.sources.formats import tfds as moved
    >>> tfds.TfdsSource is moved.TfdsSource
    True
"""

from thresher.sources.formats.tfds import (
    TfdsBuilder,
    TfdsCodec,
    TfdsInfo,
    TfdsSource,
    TfdsSplitInfo,
    is_tfds_dir,
    shard_filenames,
)

__all__ = ["TfdsBuilder", "TfdsCodec", "TfdsInfo", "TfdsSource", "TfdsSplitInfo", "is_tfds_dir",
           "shard_filenames"]
