"""global_batches in one process: global jax.Arrays with the given sharding, exact resume."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import thresher as th
from thresher.errors import BatchError

import jax  # noqa: E402
from jax.sharding import NamedSharding, PartitionSpec

from thresher.jax import global_batches, make_global_batch


@pytest.fixture(scope="module")
def sharding() -> Any:
    mesh = jax.make_mesh((jax.device_count(),), ("data",))
    return NamedSharding(mesh, PartitionSpec("data"))


def element(i: int) -> dict[str, Any]:
    return {"x": np.full((3,), i, np.float32), "pair": (np.int32(i), np.arange(2, dtype=np.int32) + i)}


def loader(n: int = 64) -> th.DataLoader:
    batch = 4 * jax.device_count()
    return th.DataLoader(th.sources.RangeDataSource(0, n), th.IndexSampler(n, shuffle=True, seed=3),
                         [element, th.Batch(batch, drop_remainder=True)])


def as_numpy(tree: Any) -> Any:
    return jax.tree.map(np.asarray, tree)


@pytest.mark.parametrize("prefetch", [0, 2])
def test_global_arrays_hold_the_local_batches(sharding: Any, prefetch: int) -> None:
    local = list(loader())
    with global_batches(iter(loader()), sharding, prefetch=prefetch) as it:
        out = list(it)
    assert len(out) == len(local)
    for g, b in zip(out, local):
        assert jax.tree.structure(g) == jax.tree.structure(b)
        for leaf in jax.tree.leaves(g):
            assert isinstance(leaf, jax.Array) and leaf.sharding == sharding
        assert jax.tree.all(jax.tree.map(np.array_equal, as_numpy(g), b))


@pytest.mark.parametrize("prefetch", [0, 1, 3])
def test_state_through_global_batches_resumes_exactly(sharding: Any, prefetch: int) -> None:
    whole = [as_numpy(b) for b in global_batches(iter(loader()), sharding, prefetch=0)]
    it = global_batches(iter(loader()), sharding, prefetch=prefetch)
    for _ in range(2):
        next(it)
    state = it.get_state()
    assert state["position"] == 2 * 4 * jax.device_count()
    it.close()
    again = global_batches(iter(loader()), sharding, prefetch=prefetch)
    again.set_state(state)
    rest = [as_numpy(b) for b in again]
    assert len(rest) == len(whole) - 2
    for a, b in zip(rest, whole[2:]):
        assert jax.tree.all(jax.tree.map(np.array_equal, a, b))


def test_leaves_that_cannot_be_jax_arrays_are_named(sharding: Any) -> None:
    with pytest.raises(BatchError, match=r"leaf \['name'\].*dtype <U"):
        make_global_batch({"x": np.zeros((2, 1)), "name": np.array(["a", "b"])}, sharding)
    with pytest.raises(BatchError, match="scalar"):
        make_global_batch({"n": np.float32(1.0)}, sharding)
    with pytest.raises(BatchError, match="no array leaves"):
        make_global_batch({}, sharding)
    it = global_batches(iter([{"name": np.array(["a"])}]), sharding, prefetch=2)
    with pytest.raises(BatchError, match="name"):
        next(it)


def test_import_thresher_does_not_import_jax() -> None:
    import subprocess
    import sys

    code = ("import sys, thresher, thresher.jax; "
            "assert 'jax' not in sys.modules and 'orbax.checkpoint' not in sys.modules, 'imported'")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=th.__path__[0] + "/..")
