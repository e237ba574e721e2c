"""Grain's Orbax names: ``PyGrainCheckpointHandler``, ``PyGrainCheckpointSave``/``Restore``.

They are thresher's Orbax handler (one JSON state file per process, converted
exactly to another process count where possible) under Grain's names, taking Grain's
``item`` argument. Importing this module imports orbax-checkpoint
(``pip install 'thresher[orbax]'``).

Example:
    >>> import tempfile
    >>> import orbax.checkpoint as ocp
    >>> import thresher.grain as grain
    >>> loader = grain.DataLoader(data_source=grain.RangeDataSource(0, 10, 1),
    ...                           sampler=grain.SequentialSampler(10), operations=[grain.Batch(2)])
    >>> it = iter(loader)
    >>> _ = next(it)
    >>> with ocp.CheckpointManager(tempfile.mkdtemp()) as mngr:
    ...     _ = mngr.save(1, args=grain.PyGrainCheckpointSave(it))
    ...     mngr.wait_until_finished()
    ...     _ = next(it)
    ...     _ = mngr.restore(1, args=grain.PyGrainCheckpointRestore(it))
    >>> next(it).tolist()
    [2, 3]
"""

from __future__ import annotations

import dataclasses
from typing import Any

from thresher._optional import missing

try:
    import orbax.checkpoint as ocp
except ModuleNotFoundError as e:
    raise missing(e, "thresher.grain.checkpoint") from e

from thresher.jax.checkpoint import CheckpointHandler as _ThresherHandler
from thresher.loader.state_input import as_state

__all__ = ["CheckpointHandler", "CheckpointRestore", "CheckpointSave", "PyGrainCheckpointHandler",
           "PyGrainCheckpointRestore", "PyGrainCheckpointSave"]


class PyGrainCheckpointHandler(_ThresherHandler):
    """thresher's Orbax CheckpointHandler under Grain's name (``process_{i}-of-{n}.json``)."""


@ocp.args.register_with_handler(PyGrainCheckpointHandler, for_save=True)
@dataclasses.dataclass
class PyGrainCheckpointSave(ocp.args.CheckpointArgs):
    """Orbax save args for a ``thresher.grain`` iterator (DataLoader or Dataset)."""

    item: Any
    state: dict[str, Any] = dataclasses.field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.state = as_state(self.item.get_state(), "PyGrainCheckpointSave")


@ocp.args.register_with_handler(PyGrainCheckpointHandler, for_restore=True)
@dataclasses.dataclass
class PyGrainCheckpointRestore(ocp.args.CheckpointArgs):
    """Orbax restore args: restores ``item`` in place (any worker count)."""

    item: Any
    allow_approximate: bool = False
    operations_changed: bool = False
    how: str | None = dataclasses.field(default=None, init=False)

    @property
    def iterator(self) -> Any:
        return self.item


# the names of the top-level ``import grain`` (``grain.checkpoint.CheckpointSave``): the same classes
CheckpointHandler = PyGrainCheckpointHandler
CheckpointSave = PyGrainCheckpointSave
CheckpointRestore = PyGrainCheckpointRestore
