"""ShardByJaxProcess() drops the trailing partial round by default, unlike Grain's: pinned,
with the reason (uneven shards give processes different numbers of steps)."""

from __future__ import annotations

import inspect

import grain.python as gp

import thresher as th


def test_default_differs_from_grain_on_purpose() -> None:
    ours = inspect.signature(th.ShardByJaxProcess).parameters["drop_remainder"].default
    grains = inspect.signature(gp.ShardByJaxProcess).parameters["drop_remainder"].default
    assert (ours, grains) == (True, False)
    opts = th.ShardByJaxProcess()  # one JAX process on CPU here
    assert (opts.shard_index, opts.shard_count, opts.drop_remainder) == (0, 1, True)
    assert th.ShardByJaxProcess(drop_remainder=False).drop_remainder is False


def test_why_uneven_shards_differ_in_steps() -> None:
    def steps(drop: bool) -> list[int]:
        return [len(th.IndexSampler(10, shuffle=True, seed=1, shard_options=th.ShardOptions(i, 3, drop)))
                for i in range(3)]

    assert steps(False) == [4, 3, 3]  # process 0 would run a step the others never join
    assert steps(True) == [3, 3, 3]
