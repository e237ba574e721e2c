"""TFRecord framing, kept here for existing imports: it lives in
:mod:`thresher.sources.formats.tfrecord.framing`.

Example:
    >>> from thresher.sources.tfds.tfrecord import frame_record
    >>> len(frame_record(b"abc"))
    19
"""

from thresher.sources.formats.tfrecord.framing import crc32c, frame_record, masked_crc, read_records

__all__ = ["crc32c", "frame_record", "masked_crc", "read_records"]
