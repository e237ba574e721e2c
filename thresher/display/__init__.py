"""Looking at a dataset: ``show_examples`` (an image grid) and ``as_dataframe`` (pandas).

Both work on thresher-prepared and TFDS-written datasets: they read the features of the
``info`` they are given (``thresher.builder(path).info``). matplotlib and pandas are
optional extras (``thresher[plot]``, ``thresher[pandas]``), imported when called.

Example:
    >>> import tempfile, os
    >>> import thresher as th
    >>> path = os.path.join(tempfile.mkdtemp(), "toy")
    >>> _ = th.prepare(path, {"train": [{"x": i, "y": i % 2} for i in range(6)]},
    ...                features={"x": th.features.Scalar("int32"),
    ...                          "y": th.features.ClassLabel(names=["even", "odd"])},
    ...                shuffle=False, progress=False)
    >>> df = th.as_dataframe(th.data_source(path, split="train"), th.builder(path).info, n=3)
    >>> df["x"].tolist(), df["y"].tolist()
    ([0, 1, 2], [0, 1, 0])
"""

from thresher.display.dataframe import as_dataframe
from thresher.display.examples import show_examples

__all__ = ["as_dataframe", "show_examples"]
