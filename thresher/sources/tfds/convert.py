"""The earlier import path of ``convert``, kept: it moved to :mod:`thresher.sources.formats.tfds.convert`.

Example:
    >>> from thresher.sources.tfds.convert import convert
    >>> from thresher.sources.formats.tfds import convert as moved
    >>> convert is moved.convert
    True
"""

from thresher.sources.formats.tfds.convert import convert

__all__ = ["convert"]
