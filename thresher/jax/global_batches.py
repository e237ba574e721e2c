"""Per-process batches -> global ``jax.Array`` batches on the mesh.

On a pod every process runs the same program and loads its own shard; the local
batches of one step together form one global batch. With the loader's default
geometry (blocks of one batch, no Filter), the local batches of step t are global
positions [t*P*b, (t+1)*P*b), and with a mesh whose data axis lists the processes'
devices in process order (``jax.make_mesh`` and ``jax.devices()`` do), the global
array holds them in that order: the same global batches for any number of processes.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from thresher._optional import require
from thresher.errors import BatchError
from thresher.jax.prefetch import DevicePrefetchIterator

if TYPE_CHECKING:
    import jax

__all__ = ["global_batches", "make_global_batch"]


def _import_jax() -> Any:
    return require("jax", "thresher.jax")


def _check_leaves(jax: Any, local_batch: Any) -> None:
    leaves, _ = jax.tree_util.tree_flatten_with_path(local_batch)
    if not leaves:
        raise BatchError("the local batch has no array leaves; there is nothing to put on the devices")
    for path, leaf in leaves:
        name = jax.tree_util.keystr(path) or "<root>"
        if isinstance(leaf, jax.Array):
            continue
        arr = np.asarray(leaf) if not isinstance(leaf, np.ndarray) else leaf
        if arr.dtype.kind not in "biufc":
            raise BatchError(
                f"leaf {name} of the local batch has dtype {arr.dtype}: jax arrays hold numbers and booleans. "
                "Decode it into numbers, or drop it, in a map before (or after) the Batch"
            )
        if arr.ndim == 0:
            raise BatchError(f"leaf {name} of the local batch is a scalar: a batch leaf needs a leading batch axis")


def make_global_batch(local_batch: Any, sharding: jax.sharding.Sharding | Any,
                      global_shape: Any = None) -> Any:
    """Makes one global batch from this process's local batch (a pytree of NumPy arrays).

    A thin, checked wrapper of ``jax.make_array_from_process_local_data``: ``sharding``
    is a ``jax.sharding.Sharding`` (or a pytree prefix of them), typically
    ``NamedSharding(mesh, PartitionSpec('data'))``; the global shape is inferred
    (the local batch axis times the number of processes along it) unless given.

    Example:
        >>> import jax, numpy as np
        >>> from jax.sharding import NamedSharding, PartitionSpec
        >>> from thresher.jax import make_global_batch
        >>> mesh = jax.make_mesh((jax.device_count(),), ("data",))
        >>> batch = make_global_batch({"x": np.ones((4, 3), np.float32)}, NamedSharding(mesh, PartitionSpec("data")))
        >>> batch["x"].shape == (4 * jax.process_count(), 3), isinstance(batch["x"], jax.Array)
        (True, True)
    """
    jax = _import_jax()
    _check_leaves(jax, local_batch)
    try:
        return jax.make_array_from_process_local_data(sharding, local_batch, global_shape)
    except Exception as e:
        shapes = jax.tree_util.tree_map(lambda x: (tuple(np.shape(x)), str(getattr(x, "dtype", "?"))), local_batch)
        note = (f"while making a global batch from process {jax.process_index()}'s local batch {shapes} "
                f"with sharding {sharding!r}")
        if hasattr(e, "add_note"):
            e.add_note(note)
        raise


def global_batches(iterator: Iterable[Any], sharding: jax.sharding.Sharding | Any, *, prefetch: int = 2,
                   global_shape: Any = None) -> DevicePrefetchIterator:
    """Turns an iterator of local batches into an iterator of global ``jax.Array`` batches.

    Args:
        iterator: this process's batches, pytrees of NumPy arrays (e.g. ``iter(loader)``).
        sharding: how each global batch lies on the devices, e.g.
            ``NamedSharding(mesh, PartitionSpec('data'))`` (or a pytree prefix of shardings).
        prefetch: global batches prepared ahead in a background thread, so the
            host-to-device copy overlaps the train step (default 2; 0 copies each batch
            when it is asked for).
        global_shape: passed to ``jax.make_array_from_process_local_data``; inferred
            when None.

    Returns a :class:`DevicePrefetchIterator`: ``get_state()`` is the state after the
    last batch it returned (never the prefetched ones), ``set_state`` restores exactly
    (or converts between process counts, see ``DataLoaderIterator.set_state``),
    ``close()`` stops the thread and the loader. Every process must call ``next`` the
    same number of times: shard with ``ShardByJaxProcess(drop_remainder=True)`` and
    batch with ``Batch(b, drop_remainder=True)`` so all processes have as many batches.

    Example:
        >>> import jax, numpy as np
        >>> import thresher as th
        >>> from jax.sharding import NamedSharding, PartitionSpec
        >>> mesh = jax.make_mesh((jax.device_count(),), ("data",))
        >>> loader = th.DataLoader(
        ...     th.sources.RangeDataSource(0, 64),
        ...     th.IndexSampler(64, shuffle=True, seed=0, shard_options=th.ShardByJaxProcess()),
        ...     [lambda i: {"x": np.full(3, i, np.float32), "y": i % 2}, th.Batch(8, drop_remainder=True)])
        >>> from thresher.jax import global_batches
        >>> with global_batches(iter(loader), NamedSharding(mesh, PartitionSpec("data"))) as batches:
        ...     first = next(batches)
        ...     state = batches.get_state()     # resumes after `first`, not after what is prefetched
        >>> first["x"].shape == (8 * jax.process_count(), 3), state["position"]
        (True, 8)
    """
    jax = _import_jax()
    if prefetch == 0:
        def transform(batch: Any) -> Any:
            return make_global_batch(batch, sharding, global_shape)
    else:
        def transform(batch: Any) -> Any:
            # Wait for the copies in the prefetch thread, so that a batch handed out is on the
            # devices and at most `prefetch` (+1 being made) batches occupy device memory.
            return jax.block_until_ready(make_global_batch(batch, sharding, global_shape))
    return DevicePrefetchIterator(iterator, transform, size=prefetch)
