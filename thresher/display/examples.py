"""``show_examples``: a grid of a dataset's images with their labels (matplotlib).

The image is the first Image feature (or ``image_key``), the caption its first
ClassLabel (or ``label_key``), shown as ``name (id)``. With ``path`` the figure is
written as a PNG (atomically); without, it is shown with ``matplotlib.pyplot.show``.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

import numpy as np

from thresher._optional import require
from thresher.display.fields import fields, get, label_text
from thresher.errors import ConfigError, FeatureError
from thresher.sources.temp_files import publish_mode

__all__ = ["show_examples"]


def _pick(leaves: list, kind: str, key: str | None, preferred: str | None) -> Any:
    by_key = {f.key: f for f in leaves}
    if key is not None:
        if key not in by_key:
            raise ConfigError(f"show_examples: no feature {key!r}; features: {sorted(by_key)}")
        return by_key[key]
    if preferred in by_key and by_key[preferred].kind == kind:
        return by_key[preferred]
    return next((f for f in leaves if f.kind == kind), None)


def show_examples(ds: Any, info: Any = None, rows: int = 3, cols: int = 3, *,
                  path: str | None = None, image_key: str | None = None,
                  label_key: str | None = None, scale: float = 2.0) -> Any:
    """Draws records ``0 .. rows*cols-1`` of ``ds`` in a grid; returns the Figure.

    Args:
        ds: a source from ``thresher.data_source`` (prepared or TFDS).
        info: the dataset's info (``thresher.builder(path).info``); defaults to ``ds.info``.
        rows, cols: the grid.
        path: write a PNG here instead of showing the figure.
        image_key, label_key: the features to draw and to caption (``a/b`` for nested).
        scale: inches per image.

    Example:
        >>> import os, tempfile
        >>> import numpy as np
        >>> import thresher as th
        >>> d = os.path.join(tempfile.mkdtemp(), "squares")
        >>> _ = th.prepare(d, {"train": [{"image": np.full((8, 8, 1), 30 * i, np.uint8),
        ...                               "label": i % 2} for i in range(4)]},
        ...                features={"image": th.features.Image((8, 8, 1)),
        ...                          "label": th.features.ClassLabel(names=["a", "b"])},
        ...                progress=False)
        >>> png = os.path.join(d, "grid.png")
        >>> fig = th.show_examples(th.data_source(d, split="train"), th.builder(d).info,
        ...                        rows=2, cols=2, path=png)
        >>> os.path.getsize(png) > 0
        True
    """
    if rows < 1 or cols < 1:
        raise ConfigError(f"show_examples: rows and cols must be >= 1, got {rows}, {cols}")
    info = info if info is not None else getattr(ds, "info", None)
    if info is None:
        raise ConfigError("show_examples needs the dataset info: show_examples(ds, "
                          "thresher.builder(path).info)")
    leaves = fields(info.features)
    keys = getattr(info, "supervised_keys", None) or (None, None)
    image = _pick(leaves, "image", image_key, keys[0])
    if image is None or image.kind != "image":
        raise FeatureError(f"show_examples: {getattr(info, 'name', 'the dataset')!r} has no "
                           "Image feature to show; use as_dataframe to look at it")
    label = _pick(leaves, "label", label_key, keys[1] if len(keys) > 1 else None)
    Figure = require("matplotlib.figure", "show_examples").Figure
    n = min(rows * cols, len(ds))
    records = ds.__getitems__(list(range(n)))
    size = (cols * scale, rows * scale * 1.15)
    if path is None:
        plt = require("matplotlib.pyplot", "show_examples")
        fig = plt.figure(figsize=size)
    else:
        fig = Figure(figsize=size)
    for i in range(rows * cols):
        ax = fig.add_subplot(rows, cols, i + 1)
        ax.axis("off")
        if i >= n:
            continue
        img = np.asarray(get(records[i], image.key))
        if img.ndim == 3 and img.shape[2] == 1:
            ax.imshow(img[:, :, 0], cmap="gray", vmin=0, vmax=255 if img.dtype == np.uint8
                      else None)
        else:
            ax.imshow(img)
        if label is not None:
            ax.set_title(label_text(label.feature, get(records[i], label.key)), fontsize=9)
    fig.tight_layout()
    if path is None:
        plt.show()
        return fig
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".show_examples.", suffix=".png", dir=directory)
    os.close(fd)
    try:
        fig.savefig(tmp, format="png", dpi=100)
        publish_mode(tmp)  # mkstemp made it 0600: give it the mode open() would (the umask)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
    return fig
