"""Parquet files read in place, with random access (:class:`ParquetSource`).

pyarrow is the ``parquet`` extra (``pip install 'thresher[parquet]'``), imported when a
source is opened.

Example:
    >>> import os, tempfile
    >>> import pyarrow as pa, pyarrow.parquet as pq
    >>> from thresher.sources.formats.parquet import ParquetSource
    >>> path = os.path.join(tempfile.mkdtemp(), "x.parquet")
    >>> pq.write_table(pa.table({"x": [1, 2, 3]}), path)
    >>> ParquetSource(path)[1]
    {'x': np.int64(2)}
"""

from thresher.sources.formats.parquet.source import ParquetSource

__all__ = ["ParquetSource"]
