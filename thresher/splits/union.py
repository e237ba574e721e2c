"""SplitUnion: ``a + b + ...``, the parts read one after the other (duplicates kept).

The class lives in :mod:`thresher.splits.base` beside ``+``, which makes it; this module keeps
its public path.

Example:
    >>> from thresher.splits import ReadInstruction
    >>> u = ReadInstruction("train", to=2) + "test"
    >>> u, [str(a) for a in u.to_absolute({"train": 5, "test": 3})]
    (SplitUnion('train[:2]+test'), ['train[0:2]', 'test[0:3]'])
"""

from thresher.splits.base import SplitUnion

__all__ = ["SplitUnion"]
