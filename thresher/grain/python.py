"""``thresher.grain.python``: Grain's ``grain.python`` module, the same names as :mod:`thresher.grain`.

``import grain.python as grain`` becomes ``import thresher.grain.python as grain``.

Example:
    >>> import thresher.grain
    >>> import thresher.grain.python as grain
    >>> grain.MapDataset is thresher.grain.MapDataset and grain.INDEX == "_index"
    True
"""

from __future__ import annotations

from typing import Any

import thresher.grain as _grain
from thresher.grain import *  # noqa: F403 - the same public names
from thresher.grain import __all__ as __all__


def __getattr__(name: str) -> Any:
    return getattr(_grain, name)  # the lazy names (PyGrainCheckpointSave, ...) and the advice for absent ones
