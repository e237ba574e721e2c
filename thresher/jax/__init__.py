"""thresher on JAX: global batches across processes, device prefetch, Orbax checkpoints.

jax (and orbax) are imported when used, never by ``import thresher``.

- :func:`global_batches`: each process's local batches -> global ``jax.Array``s on the
  mesh, copied to the devices ``prefetch`` batches ahead in a background thread.
- :class:`CheckpointSave` / :class:`CheckpointRestore`: the iterator in an Orbax
  checkpoint, one JSON file per process; restores on another number of processes
  where that is exact (``set_state`` rules), approximately only when asked.
- :func:`slowest_state`: merge all processes' states for an approximate restart.

Example:
    >>> import thresher.jax
    >>> sorted(thresher.jax.__all__)[:3]
    ['CheckpointHandler', 'CheckpointRestore', 'CheckpointSave']
"""

from __future__ import annotations

from typing import Any

from thresher.jax.global_batches import global_batches, make_global_batch
from thresher.jax.prefetch import DevicePrefetchIterator
from thresher.loader.state import slowest_state

__all__ = [
    "CheckpointHandler",
    "CheckpointRestore",
    "CheckpointSave",
    "DevicePrefetchIterator",
    "global_batches",
    "make_global_batch",
    "slowest_state",
]

_ORBAX_NAMES = frozenset({"CheckpointHandler", "CheckpointRestore", "CheckpointSave"})


def __getattr__(name: str) -> Any:
    # The Orbax classes import orbax-checkpoint, so they are loaded on first use.
    if name in _ORBAX_NAMES:
        from thresher.jax import checkpoint

        return getattr(checkpoint, name)
    raise AttributeError(f"module 'thresher.jax' has no attribute {name!r}")
