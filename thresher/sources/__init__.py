"""Data sources: random access to records by key.

Example:
    >>> import thresher as th
    >>> len(th.sources.RangeDataSource(0, 5))
    5
"""

# The names are imported on first use (thresher._optional.lazy_names): the engine's modules
# import thresher.sources.protocol without importing every storage format.
from typing import TYPE_CHECKING

from thresher._optional import lazy_names

if TYPE_CHECKING:
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

__getattr__, __dir__ = lazy_names(__name__, {
    "ArrayRecordSource": "thresher.sources.formats.array_record.source",
    "ArrayRecordWriter": "thresher.sources.formats.array_record.writer",
    "write_array_record": "thresher.sources.formats.array_record.writer",
    "HuggingFaceSource": "thresher.sources.formats.huggingface",
    "ImageFolderSource": "thresher.sources.formats.image_folder",
    "ParquetSource": "thresher.sources.formats.parquet",
    "TFRecordSource": "thresher.sources.formats.tfrecord",
    "WebDatasetSource": "thresher.sources.formats.webdataset",
    "InMemoryDataSource": "thresher.sources.in_memory",
    **dict.fromkeys(("DEFAULT_READS_IN_FLIGHT", "BatchedDataSource", "ConcurrentReadsSource", "RandomAccessDataSource",
                     "read_many", "suggested_reads_in_flight", "supports_batched_reads"), "thresher.sources.protocol"),
    "RangeDataSource": "thresher.sources.range",
    **{name: f"thresher.sources.{name}" for name in ("formats", "in_memory", "paths", "protocol", "range", "remote",
                                                      "temp_files", "write", "directory", "sharded_records")},
})

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
