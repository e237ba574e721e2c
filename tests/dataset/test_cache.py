"""cache(): the work before it runs once per element; on disk it is built once, atomically."""

from __future__ import annotations

import collections
import os
import subprocess
import sys

import numpy as np
import pytest

import thresher as th
from tests.dataset.spec import REPO

D = th.Dataset


def test_memory_cache_runs_the_map_once_per_element_across_epochs() -> None:
    calls: collections.Counter = collections.Counter()

    def expensive(x: int) -> int:
        calls[x] += 1
        return x * x

    ds = D.range(40).map(expensive).cache().shuffle(seed=2).repeat(4).batch(6)
    out = np.concatenate(list(ds))
    assert sorted(out.tolist()) == sorted([x * x for x in range(40)] * 4)
    assert len(calls) == 40 and max(calls.values()) == 1
    assert len(ds) == 27 and ds[3].shape == (6,)  # still random access
    assert max(calls.values()) == 1


def test_memory_cache_size_limit() -> None:
    ds = D.range(10).map(lambda x: np.zeros(100)).cache(max_bytes=2000)
    with pytest.raises(th.errors.CacheError, match="max_bytes=2000"):
        list(ds)


CHILD = """
import sys
import thresher as th
def boom(x):
    raise AssertionError("the map before the cache ran again")
def keep_all(x):
    return True
ds = th.Dataset.range(50).map(boom).filter(keep_all).cache(sys.argv[1]).shuffle(seed=1).batch(7)
print(len(ds), sum(int(b.sum()) for b in ds))
"""


CALLS: collections.Counter = collections.Counter()


def expensive(x: int) -> int:
    CALLS[x] += 1
    return x * 3


def keep_all(x: int) -> bool:
    return True


def test_disk_cache_is_built_once_and_read_by_later_processes(tmp_path) -> None:
    path = str(tmp_path / "cache.array_record")
    calls = CALLS
    calls.clear()
    ds = D.range(50).map(expensive).filter(keep_all).cache(path).shuffle(seed=1).batch(7)
    total = sum(int(b.sum()) for b in ds.repeat(1))
    assert len(ds) == 8  # the filter's survivors, counted: random access again
    assert max(calls.values()) == 1 and total == 3 * sum(range(50))
    assert sorted(os.listdir(tmp_path)) == ["cache.array_record", "cache.array_record.json"]
    # a fresh process reads the cache: the map never runs there (boom, named like the map, raises)
    proc = subprocess.run([sys.executable, "-c", CHILD.replace("boom", "expensive"), path], capture_output=True,
                          text=True, cwd=REPO, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["8", str(total)]


def test_disk_cache_of_another_pipeline_is_refused(tmp_path) -> None:
    path = str(tmp_path / "c.array_record")
    list(D.range(10).map(lambda x: x + 1).cache(path))
    with pytest.raises(th.errors.CacheError, match="another pipeline"):
        list(D.range(11).map(lambda x: x + 1).cache(path))


def test_disk_cache_past_its_limit_or_interrupted_leaves_nothing(tmp_path) -> None:
    path = str(tmp_path / "c.array_record")
    with pytest.raises(th.errors.CacheError, match="max_bytes"):
        list(D.range(100).map(lambda x: np.zeros(50)).cache(path, max_bytes=2000))
    assert os.listdir(tmp_path) == []

    def fails(x: int) -> int:
        if x == 30:
            raise ValueError("bad record")
        return x

    with pytest.raises(th.errors.TransformError, match="bad record"):
        list(D.range(100).map(fails).cache(path))
    assert os.listdir(tmp_path) == []


def test_cache_needs_a_finite_dataset() -> None:
    with pytest.raises(th.errors.ConfigError, match="endless"):
        list(D.range(3).repeat().cache())
