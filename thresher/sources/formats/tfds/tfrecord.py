"""TFRecord framing, kept here for existing imports: it lives in
:mod:`thresher.sources.formats.tfrecord.framing`.

Example:
    >>> import io
    >>> from thresher.sources.formats.tfds.tfrecord import frame_record, read_records
    >>> data = frame_record(b"hello") + frame_record(b"")
    >>> list(read_records(io.BytesIO(data), "mem"))
    [b'hello', b'']
"""

from thresher.sources.formats.tfrecord.framing import crc32c, frame_record, masked_crc, read_records

__all__ = ["crc32c", "frame_record", "masked_crc", "read_records"]
