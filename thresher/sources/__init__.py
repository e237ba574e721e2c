"""Data sources: random access to records by key.

Example:
    >>> import thresher as th
    >>> len(th.sources.RangeDataSource(0, 5))
    5
"""

from thresher.sources.formats.array_record.source import ArrayRecordSource
from thresher.sources.formats.array_record.writer import ArrayRecordWriter, write_array_record
from thresher.sources.formats.huggingface import HuggingFaceSource
from thresher.sources.formats.image_folder import ImageFolderSource
from thresher.sources.formats.parquet import ParquetSource
from thresher.sources.formats.tfrecord import TFRecordSource
from thresher.sources.formats.webdataset import WebDatasetSource
from thresher.sources.in_memory import InMemoryDataSource
from thresher.sources.protocol import (
    DEFAULT_READS_IN_FLIGHT,
    BatchedDataSource,
    ConcurrentReadsSource,
    RandomAccessDataSource,
    read_many,
    suggested_reads_in_flight,
    supports_batched_reads,
)
from thresher.sources.range import RangeDataSource

__all__ = [
    "DEFAULT_READS_IN_FLIGHT",
    "ArrayRecordSource",
    "ArrayRecordWriter",
    "BatchedDataSource",
    "ConcurrentReadsSource",
    "HuggingFaceSource",
    "ImageFolderSource",
    "InMemoryDataSource",
    "ParquetSource",
    "RandomAccessDataSource",
    "RangeDataSource",
    "TFRecordSource",
    "WebDatasetSource",
    "read_many",
    "suggested_reads_in_flight",
    "supports_batched_reads",
    "write_array_record",
]
