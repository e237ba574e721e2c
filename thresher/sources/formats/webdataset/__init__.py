"""WebDataset tar shards read in place: a cached index of samples per shard, then random access.

Example:
    >>> from thresher.sources.formats.webdataset import split_key
    >>> split_key("images/n01440764_10026.JPEG")
    ('images/n01440764_10026', 'jpeg')
"""

from thresher.sources.formats.webdataset.decode import DECODERS, decode_sample
from thresher.sources.formats.webdataset.index import INDEX_KIND, INDEX_VERSION, scan_tar, split_key
from thresher.sources.formats.webdataset.source import WebDatasetSource

__all__ = ["DECODERS", "INDEX_KIND", "INDEX_VERSION", "WebDatasetSource", "decode_sample", "scan_tar",
           "split_key"]
