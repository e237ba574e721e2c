"""Static optimisation: rewrites that never change the output; explain(); stable state across it."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import thresher as th
from tests.helpers import digest
from thresher.dataset import nodes as N

D = th.Dataset


def _same(ds: th.Dataset) -> list[str]:
    on = [digest(x) for x in ds]
    off = [digest(x) for x in ds.with_options(optimize=False)]
    assert on == off
    return on


def add_one(x):
    return x + 1


def halve(x):
    return x / 2


def test_batchable_maps_run_once_per_batch() -> None:
    calls = []

    def counted(x):
        calls.append(np.shape(x))
        return x * 3

    ds = D.range(10).shuffle(seed=1).map(counted, batchable=True).map(halve, batchable=True).batch(4)
    kinds = [type(n).__name__ for n in ds.optimized_nodes()]
    assert kinds == ["Source", "Shuffle", "BatchNode", "MapBatch"]
    _same(ds)
    calls.clear()
    list(ds)
    assert calls == [(4,), (4,), (2,)]


def test_vectorisation_is_not_applied_where_it_could_change_the_output() -> None:
    padded = D.range(5).map(lambda n: np.arange(n + 1)).map(add_one, batchable=True).batch(2, pad_to="max")
    assert not any(isinstance(n, N.MapBatch) for n in padded.optimized_nodes())  # padding would be mapped too
    _same(padded)
    filtered = D.range(9).map(add_one, batchable=True).filter(lambda x: x % 2 == 0).batch(2)
    assert not any(isinstance(n, N.MapBatch) for n in filtered.optimized_nodes())
    _same(filtered)
    twice = D.range(8).batch(2).map(add_one, batchable=True).batch(2)
    assert not any(isinstance(n, N.MapBatch) for n in twice.optimized_nodes())


def test_fusion_and_noop_removal() -> None:
    ds = (D.range(20)[:].repeat(1).map(add_one).map(th.dataset.identity).map(halve)
          .filter(lambda x: x > 2).filter(lambda x: x < 8).shuffle(seed=2).batch(3)
          .map_batch(np.cumsum).map_batch(np.flip))
    kinds = [type(n).__name__ for n in ds.optimized_nodes()]
    assert kinds == ["Source", "Map", "Filter", "Shuffle", "BatchNode", "MapBatch"]
    _same(ds)
    assert D.range(20)[2:].optimized_nodes()[-1].describe() == "slice(2, None, None)"


@given(seed=st.integers(0, 2**64 - 1), n=st.integers(0, 30), b=st.integers(1, 5),
       marks=st.lists(st.booleans(), min_size=3, max_size=3))
@settings(max_examples=60, deadline=None)
def test_optimised_equals_unoptimised(seed: int, n: int, b: int, marks: list[bool]) -> None:
    ds = (D.range(n).map(add_one, batchable=marks[0]).random_map(lambda x, rng: x + int(rng.integers(9)), seed=3)
          .map(halve, batchable=marks[1]).map(add_one, batchable=marks[2]).shuffle(seed=seed).batch(b))
    _same(ds)


def test_state_of_an_optimised_run_restores_unoptimised_and_back() -> None:
    ds = D.range(30).map(add_one, batchable=True).map(halve).random_map(lambda x, rng: x + rng.random()).batch(4)
    full = [digest(x) for x in ds]
    for a, b in ((ds, ds.with_options(optimize=False)), (ds.with_options(optimize=False), ds)):
        it = iter(a)
        next(it), next(it)
        state = it.get_state()
        it2 = iter(b)
        it2.set_state(state)
        assert [digest(x) for x in it2] == full[2:]


def test_explain_prints_before_and_after(capsys: pytest.CaptureFixture[str]) -> None:
    D.range(10).map(add_one, batchable=True).map(halve, batchable=True).batch(4).explain()
    out = capsys.readouterr().out
    assert "as written:" in out and "optimised:" in out and "engine:" in out
    assert "[1] map(add_one)" in out and "map_batch(add_one)+map_batch(halve)" in out
    assert "vectorised" in out and "stage 0: RangeDataSource(0, 10, 1) -> Batch(4" in out
    D.range(3).with_options(optimize=False).explain()
    assert "optimisation is off" in capsys.readouterr().out
