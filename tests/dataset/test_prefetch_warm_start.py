"""``Dataset.prefetch(warm_start=...)`` (opt-in): the first chunks computed in this process while
the worker processes start change when work happens, never the elements or the states."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import thresher as th
from thresher.errors import ConfigError


def _docs(i: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(i)
    return {"tokens": rng.integers(1, 100, size=int(rng.integers(1, 40)), dtype=np.int32)}


def _chains() -> dict[str, th.Dataset]:
    return {
        "filtered": th.Dataset.range(3000).shuffle(seed=3).map(lambda x: x * 7).filter(lambda x: x % 3).batch(16),
        "packed": th.Dataset.range(600).shuffle(seed=5).map(_docs).pack(64).batch(4),
    }


def _flat(batch: Any) -> list[Any]:
    if isinstance(batch, dict):
        return [(k, v.tolist()) for k, v in sorted(batch.items())]
    return np.asarray(batch).tolist()


@pytest.mark.parametrize("name", ["filtered", "packed"])
def test_warm_start_on_and_off_give_the_elements_and_states_of_no_workers(name: str) -> None:
    ds = _chains()[name]
    with iter(ds) as it:
        ref = [_flat(b) for b in it]
    for warm in (True, False):
        with iter(ds.prefetch(worker_count=2, warm_start=warm)) as it:
            assert it._compiled.loader.warm_start is warm  # the option reaches the loader
            head = [_flat(next(it)) for _ in range(5)]
            state = it.get_state()
        assert head == ref[:5]
        # a restore deep in the run, on a fresh iterator with the other setting
        with iter(ds.prefetch(worker_count=2, warm_start=not warm)) as again:
            again.set_state(state)
            assert [_flat(b) for b in again] == ref[5:]


def test_warm_start_is_described_and_checked() -> None:
    ds = th.Dataset.range(4)
    assert ds.prefetch(worker_count=2, warm_start=True).nodes[-1].describe() == (
        "prefetch(worker_count=2, buffer=2, warm_start=True)")
    assert "warm_start" not in ds.prefetch(worker_count=2).nodes[-1].describe()  # off by default
    assert ds.prefetch(worker_count=2).nodes[-1].warm_start is False
    # speed only: the fingerprint (what a state is checked against) does not change
    assert ds.prefetch(worker_count=2, warm_start=True).fingerprint() == ds.prefetch(worker_count=2).fingerprint()
    with pytest.raises(ConfigError, match="warm_start"):
        ds.prefetch(worker_count=2, warm_start="no")  # type: ignore[arg-type]
