"""Hugging Face datasets read in place, with random access (:class:`HuggingFaceSource`).

pyarrow is needed (``pip install 'thresher[huggingface]'``, which brings ``datasets``
too); a ``save_to_disk`` directory or a ``pyarrow.Table`` is read without ``datasets``.

Example:
    >>> import pyarrow as pa
    >>> from thresher.sources.formats.huggingface import HuggingFaceSource
    >>> HuggingFaceSource(pa.table({"x": [1, 2]}))[1]
    {'x': np.int64(2)}
"""

from thresher.sources.formats.huggingface.media import decode_audio, decode_image
from thresher.sources.formats.huggingface.source import HuggingFaceSource

__all__ = ["HuggingFaceSource", "decode_audio", "decode_image"]
