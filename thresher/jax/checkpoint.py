"""Saving and restoring thresher iterators with Orbax, next to the model.

Importing this module imports orbax-checkpoint (``pip install 'thresher[orbax]'``);
``thresher.jax.CheckpointSave`` and friends import it on first use.

Each process writes its own state, ``process_{i}-of-{P}.json``, into the item's
directory. A restore with the same number of processes reads each process's own
file; with another number it reads one file and converts it where the rule of
:mod:`thresher.jax.state_files` allows; a run that no single state describes (a Filter
before the Batch) is restored from the merge of all files, exactly once; otherwise it
refuses (or, with ``allow_approximate=True``, restarts approximately, as documented there).

Example:
    >>> import tempfile
    >>> import orbax.checkpoint as ocp
    >>> import thresher as th
    >>> from thresher.jax import CheckpointSave, CheckpointRestore
    >>> loader = th.DataLoader(th.sources.RangeDataSource(0, 10), th.IndexSampler(10), [th.Batch(2)])
    >>> it = iter(loader)
    >>> _ = next(it)
    >>> with ocp.CheckpointManager(tempfile.mkdtemp()) as mngr:
    ...     _ = mngr.save(1, args=ocp.args.Composite(data=CheckpointSave(it)))
    ...     mngr.wait_until_finished()
    ...     it2 = iter(loader)
    ...     restored = mngr.restore(1, args=ocp.args.Composite(data=CheckpointRestore(it2)))
    >>> restored["data"] is it2, next(it2).tolist()
    (True, [2, 3])
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from thresher._optional import missing, require

try:
    import orbax.checkpoint as ocp
    from etils import epath
except ModuleNotFoundError as e:
    raise missing(e, "thresher.jax.checkpoint", extra="orbax") from e

from thresher.jax.state_files import (
    load_state_text,
    parse_state_filenames,
    restore_from_states,
    state_filename,
)
from thresher.loader.state_input import as_state

__all__ = ["CheckpointHandler", "CheckpointRestore", "CheckpointSave"]


def _process() -> tuple[int, int]:
    jax = require("jax", "thresher.jax.checkpoint")
    return jax.process_index(), jax.process_count()


class CheckpointHandler(ocp.CheckpointHandler):
    """The Orbax CheckpointHandler of thresher iterators (one JSON file per process).

    Orbax picks it through :class:`CheckpointSave` / :class:`CheckpointRestore`;
    there is no need to name it, except to register it with an item name in a
    ``CheckpointManager(item_handlers=...)``.
    """

    def save(self, directory: epath.Path, args: CheckpointSave) -> None:
        index, count = _process()
        path = epath.Path(directory) / state_filename(index, count)
        path.write_text(json.dumps(args.state, sort_keys=True))

    def restore(self, directory: epath.Path, args: CheckpointRestore | None = None) -> Any:
        if args is None:
            raise ValueError("restoring a thresher iterator needs CheckpointRestore(iterator): the state is "
                             "applied to the iterator you pass")
        directory = epath.Path(directory)
        where = f"the checkpoint item {directory}"
        saved_count = parse_state_filenames((p.name for p in directory.iterdir()), where)
        index, count = _process()

        def read(i: int) -> dict[str, Any]:
            name = state_filename(i, saved_count)
            return load_state_text((directory / name).read_text(), f"{where}/{name}")

        args.how = restore_from_states(args.iterator, read, saved_count, index, count,
                                       allow_approximate=args.allow_approximate,
                                       operations_changed=args.operations_changed)
        return args.iterator

    def metadata(self, directory: epath.Path) -> dict[str, Any] | None:
        """The saving run's process count, or None if the item holds no state files."""
        names = [p.name for p in epath.Path(directory).iterdir()]
        try:
            return {"process_count": parse_state_filenames(names, str(directory))}
        except ValueError:
            return None


@ocp.args.register_with_handler(CheckpointHandler, for_save=True)
@dataclasses.dataclass
class CheckpointSave(ocp.args.CheckpointArgs):
    """Orbax save args for a thresher iterator: ``data=thresher.jax.CheckpointSave(it)``.

    The state is taken when this is created, i.e. in the ``mngr.save(...)`` call, so
    an asynchronous save records the step it was asked for even if the training loop
    moves on. ``iterator`` is anything with ``get_state()``: a DataLoaderIterator or
    the iterator of :func:`thresher.jax.global_batches`.
    """

    iterator: Any
    state: dict[str, Any] = dataclasses.field(init=False, repr=False)

    def __post_init__(self) -> None:
        get_state = getattr(self.iterator, "get_state", None)
        if not callable(get_state):
            raise TypeError(f"CheckpointSave needs an iterator with get_state(), got {self.iterator!r}")
        self.state = as_state(get_state(), "CheckpointSave")  # bytes of JSON (thresher.grain) too


@ocp.args.register_with_handler(CheckpointHandler, for_restore=True)
@dataclasses.dataclass
class CheckpointRestore(ocp.args.CheckpointArgs):
    """Orbax restore args: ``data=thresher.jax.CheckpointRestore(it)`` restores ``it`` in place.

    Attributes:
        iterator: the iterator to restore (a DataLoaderIterator or a global_batches one).
        allow_approximate: where an exact restore is impossible, restart approximately
            (see :mod:`thresher.jax.state_files`) instead of raising GeometryError.
        operations_changed: the checkpoint was saved with other per-record operations; keep its
            positions and sampler and apply this iterator's operations from the next record on
            (``DataLoaderIterator.set_state(state, operations_changed=True)``).
        how: set by the restore: "exact", "exact-merged" (from the merge of all processes'
            states: each element not yet delivered is delivered once), "approximate" or
            "approximate-slowest".
    """

    iterator: Any
    allow_approximate: bool = False
    operations_changed: bool = False
    how: str | None = dataclasses.field(default=None, init=False)
