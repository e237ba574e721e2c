"""Prepared dataset directories: ``dataset_info.json`` + sharded ArrayRecord files.

``thresher.prepare`` (:mod:`thresher.sources.write`) writes one, ``builder``/``data_source``
read one. The format is described in ``docs/prepared_format.md`` so that other tools can
write it.

Example:
    >>> from thresher.sources.formats.prepared import shard_filename
    >>> shard_filename("mnist", "test", 2, 3)
    'mnist-test.array_record-00002-of-00003'
"""

from thresher.sources.formats.prepared.info import (
    DatasetInfo,
    FileInstruction,
    SplitDict,
    SplitInfo,
    SubSplitInfo,
)
from thresher.sources.formats.prepared.layout import FORMAT, FORMAT_VERSION, INFO_FILE, shard_filename
from thresher.sources.formats.prepared.reader import ReadOnlyBuilder, builder, data_source
from thresher.sources.formats.prepared.source import PreparedSource

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "INFO_FILE",
    "DatasetInfo",
    "FileInstruction",
    "PreparedSource",
    "ReadOnlyBuilder",
    "SplitDict",
    "SplitInfo",
    "SubSplitInfo",
    "builder",
    "data_source",
    "shard_filename",
]
