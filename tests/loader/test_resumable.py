"""Every thresher iterator is one ResumableIterator; the Engine starts nothing until used."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import jax
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec

import thresher as th
from thresher.jax import DevicePrefetchIterator, global_batches
from thresher.loader.resumable import ResumableIterator


def _loader() -> th.DataLoader:
    return th.DataLoader(
        th.sources.RangeDataSource(0, 32),
        th.IndexSampler(32, shuffle=True, seed=1),
        [lambda x: np.float32(x), th.Batch(4, drop_remainder=True)],
    )


def _check(it: ResumableIterator) -> list[list[float]]:
    """The protocol, used only through its methods: two batches, a state, stats, a restore."""
    assert isinstance(it, ResumableIterator)
    first = np.asarray(next(it)).tolist()
    state = it.get_state()
    second = np.asarray(next(it)).tolist()
    assert it.stats().batches >= 2
    it.set_state(state)
    assert np.asarray(next(it)).tolist() == second
    it.close()
    return [first, second]


def test_loader_dataset_and_jax_iterators_are_resumable_iterators() -> None:
    want = _check(iter(_loader()))
    assert _check(DevicePrefetchIterator(iter(_loader()), size=2)) == want
    mesh = jax.make_mesh((jax.device_count(),), ("data",))
    assert (
        _check(global_batches(iter(_loader()), NamedSharding(mesh, PartitionSpec("data")))) == want
    )
    ds = th.Dataset.range(32).shuffle(seed=1).map(np.float32).batch(4, drop_remainder=True)
    _check(iter(ds))


def test_a_data_loader_with_workers_starts_no_worker_until_it_is_iterated() -> None:
    # Construction starts multiprocessing's fork server in the background (documented in
    # docs/workers.md: it imports the script's modules while the model is built), and nothing
    # else: no worker process exists before the first next(). Waiting for the server makes the
    # count deterministic (counting right after construction raced the background start).
    script = textwrap.dedent("""
        import psutil, thresher as th
        from thresher.loader import warm_start
        if __name__ == "__main__":
            loader = th.DataLoader(th.sources.RangeDataSource(0, 64), th.IndexSampler(64),
                                   [th.Batch(8)],
                                   worker_count=2)
            assert warm_start.wait(60.0)
            kinds = sorted(
                "forkserver" if "forkserver" in " ".join(p.cmdline())
                else "resource_tracker" if "resource_tracker" in " ".join(p.cmdline())
                else "other"
                for p in psutil.Process().children(recursive=True))
            batches = [b.tolist() for b in loader]
            print(",".join(kinds), len(batches))
    """)
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120
    )
    kinds, count = out.stdout.split()
    assert count == "8"
    assert "forkserver" in kinds.split(",")
    assert "other" not in kinds.split(","), kinds
