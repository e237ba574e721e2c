"""Invariant 5 across process counts: (P, b) -> (P', b') restores continue the global stream.

P processes are simulated in-process with ShardOptions(i, P): the global batch of
step t is the concatenation of the P local batches of step t. A state saved by any
one of them after k steps is restored by P' new loaders; their global batches must
be the global stream from the saved position on, exactly, whenever the rule allows
(and GeometryError otherwise; an approximate restart only on request).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import thresher as th
from thresher.errors import GeometryError, InvalidStateError
from thresher.loader.state import next_global_position, slowest_state


def tag(x: int, rng: np.random.Generator) -> tuple[int, int]:
    return (x, int(rng.integers(1 << 30)))  # the per-record randomness travels with the record


def _loader(n: int, seed: int, epochs: int, i: int, shards: int, batch: int, *, filt: bool = False,
            shard_drop: bool = True, batch_filter: bool = False) -> th.DataLoader:
    sampler = th.IndexSampler(n, shuffle=True, seed=seed, num_epochs=epochs,
                              shard_options=th.ShardOptions(i, shards, drop_remainder=shard_drop))
    ops: list[Any] = [th.RandomMapTransform(tag)]
    if filt:
        ops.append(th.FilterTransform(lambda e: e[0] % 3 != 1))
    ops.append(th.Batch(batch, drop_remainder=True))
    if batch_filter:
        ops.append(th.FilterTransform(lambda b: int(b[0][0]) % 2 == 0))
    return th.DataLoader(th.sources.RangeDataSource(0, n), sampler, ops)


def _steps(its: list[Any]) -> list[list[tuple[int, int]]]:
    """The global batches of lock-stepped shards: step t is the P local batches of step t, in order."""
    out = []
    while True:
        try:
            parts = [next(it) for it in its]
        except StopIteration:
            return out
        out.append([(int(k), int(r)) for b in parts for k, r in zip(b[0], b[1])])


def _stream(n: int, seed: int, epochs: int) -> list[tuple[int, int]]:
    return [e for step in _steps([iter(_loader(n, seed, epochs, 0, 1, 1))]) for e in step]


geometries = st.tuples(st.integers(1, 4), st.integers(1, 6))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(1, 90), epochs=st.integers(1, 2), seed=st.integers(0, 2**64 - 1), old=geometries,
       new=geometries, k=st.integers(0, 40), saver=st.integers(0, 3), data=st.data())
def test_conversion_continues_the_global_stream_exactly_or_refuses(
        n: int, epochs: int, seed: int, old: tuple[int, int], new: tuple[int, int], k: int, saver: int,
        data: st.DataObject) -> None:
    (P, b), (P2, b2) = old, new
    whole = _stream(n, seed, epochs)
    total = n * epochs
    its = [iter(_loader(n, seed, epochs, i, P, b)) for i in range(P)]
    steps = total // (P * b)
    k = min(k, steps)
    done = [e for _ in range(k) for it in its for e in it.__next__()[0].tolist()]
    assert done == [e[0] for e in whole[:k * P * b]]  # the global batches are the global stream, for any P
    state = its[saver % P].get_state()
    G = k * P * b
    assert state["global_position"] == G
    exact = P2 == 1 or G % (P2 * b2) == 0
    new_its = [iter(_loader(n, seed, epochs, i, P2, b2)) for i in range(P2)]
    if not exact:
        with pytest.raises(GeometryError, match="whole number of new global batches"):
            new_its[data.draw(st.integers(0, P2 - 1))].set_state(state)
        for it in new_its:
            it.set_state(state, allow_approximate=True)
        start = (G // (P2 * b2)) * (P2 * b2)
    else:
        for it in new_its:
            it.set_state(state)
        start = G
    rest = [e for step in _steps(new_its) for e in step]
    assert rest == whole[start:start + len(rest)]
    # and the restored shards serve everything an uninterrupted run of the new geometry serves
    local = _loader(n, seed, epochs, 0, P2, b2).sampler.local_length
    assert len(rest) == (P2 * b2 * ((local - start // P2) // b2) if local > start // P2 else 0)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(8, 80), P=st.integers(1, 4), P2=st.integers(1, 4), b=st.integers(1, 4),
       b2=st.integers(1, 4), advance=st.lists(st.integers(0, 6), min_size=4, max_size=4),
       seed=st.integers(0, 1000))
def test_approximate_restart_from_the_slowest_process_skips_nothing(
        n: int, P: int, P2: int, b: int, b2: int, advance: list[int], seed: int) -> None:
    """With a Filter before the Batch, processes drift apart: restarting at the slowest one's
    position (rounded down to a new round) serves again only what some process had taken."""
    def loader(i: int, shards: int, batch: int) -> th.DataLoader:
        sampler = th.IndexSampler(n, shard_options=th.ShardOptions(i, shards))  # no shuffle: key == position
        return th.DataLoader(th.sources.RangeDataSource(0, n), sampler,
                             [th.FilterTransform(lambda x: (x * 7 + seed) % 3 != 0), th.Batch(batch)])

    its = [iter(loader(i, P, b)) for i in range(P)]
    taken: list[int] = []
    for it, a in zip(its, advance):
        for _ in range(a):
            try:
                taken += next(it).tolist()
            except StopIteration:
                break
    states = [it.get_state() for it in its]
    merged = slowest_state(list(reversed(states)))
    G = min(next_global_position(s) for s in states)
    assert merged["slowest_global_position"] == G
    new = [iter(loader(i, P2, b2)) for i in range(P2)]
    if P > 1 and P2 > 1 and P != P2:
        with pytest.raises(GeometryError, match="Filter"):
            new[0].set_state(states[0])
        with pytest.raises(GeometryError, match="allow_approximate"):
            new[0].set_state(merged)
    served: list[int] = []
    for it in new:
        it.set_state(merged, allow_approximate=True)
        served += [x for batch in it for x in batch.tolist()]
    kept = [x for x in range(n) if (x * 7 + seed) % 3 != 0]
    assert sorted(set(taken) | set(served)) == kept  # nothing skipped
    assert len(served) == len(set(served))  # the new run serves each element once
    restart = (G // P2) * P2
    assert min(served, default=n) >= restart
    again = set(taken) & set(served)
    assert all(restart <= x for x in again)  # only what was taken after the restart point comes again


def test_slowest_state_needs_one_complete_run() -> None:
    its = [iter(_loader(40, 1, 1, i, 2, 2, filt=True)) for i in range(2)]
    for it in its:
        next(it)
    states = [it.get_state() for it in its]
    with pytest.raises(InvalidStateError, match=r"shards \[1\] are missing"):
        slowest_state(states[:1])
    with pytest.raises(InvalidStateError, match="two states of shard 0"):
        slowest_state([states[0], states[0]])
    other = iter(_loader(40, 2, 1, 1, 2, 2, filt=True))
    with pytest.raises(InvalidStateError, match="different global streams"):
        slowest_state([states[0], other.get_state()])
    with pytest.raises(InvalidStateError, match="already merged"):
        slowest_state([slowest_state(states), states[1]])
    with pytest.raises(InvalidStateError, match="list of states"):
        slowest_state(states[0])  # type: ignore[arg-type]


def test_a_merged_state_is_only_applied_on_request() -> None:
    its = [iter(_loader(40, 1, 1, i, 2, 2, filt=True)) for i in range(2)]
    next(its[0])
    merged = slowest_state([it.get_state() for it in its])
    with pytest.raises(GeometryError, match="allow_approximate=True"):
        iter(_loader(40, 1, 1, 0, 2, 2, filt=True)).set_state(merged)


def test_a_filter_after_the_batch_breaks_alignment_too() -> None:
    """A batch Filter drops a batch on one process and not another: no global position then."""
    it = iter(_loader(64, 1, 1, 0, 2, 4, batch_filter=True))
    next(it)
    state = it.get_state()
    assert state["geometry"]["aligned"] is False and state["global_position"] is None
    with pytest.raises(GeometryError, match="Filter"):
        iter(_loader(64, 1, 1, 0, 4, 2, batch_filter=True)).set_state(state)


def test_one_process_states_convert_to_any_process_count_at_a_whole_new_global_batch() -> None:
    whole = _stream(50, 3, 1)
    it = iter(_loader(50, 3, 1, 0, 1, 6))
    for _ in range(2):
        next(it)
    state = it.get_state()  # global position 12
    new = [iter(_loader(50, 3, 1, i, 3, 2)) for i in range(3)]
    for x in new:
        x.set_state(state)
    assert _steps(new)[0] == whole[12:18]
    with pytest.raises(GeometryError):
        iter(_loader(50, 3, 1, 0, 4, 2)).set_state(state)  # 12 is not a whole number of 8s


def test_a_mid_block_state_is_refused_with_the_reason() -> None:
    it = iter(_loader(50, 3, 1, 0, 2, 4, shard_drop=False))
    for _ in range(20):
        try:
            next(it)
        except StopIteration:
            break
    state = it.get_state()
    if state["position"] % 4:
        with pytest.raises(GeometryError, match="not at a step boundary"):
            iter(_loader(50, 3, 1, 0, 4, 2, shard_drop=False)).set_state(state)


def test_a_one_process_state_with_a_filter_knows_its_global_position() -> None:
    """One process: the local position is the global one, so P' processes can start from it."""
    def loader(i: int, n: int) -> th.DataLoader:
        sampler = th.IndexSampler(60, shuffle=True, seed=2, shard_options=th.ShardOptions(i, n))
        return th.DataLoader(th.sources.RangeDataSource(0, 60), sampler,
                             [th.FilterTransform(lambda x: x % 3 != 1), th.Batch(3)])

    whole = [x for b in loader(0, 1) for x in b.tolist()]
    it = iter(loader(0, 1))
    for _ in range(4):
        next(it)
    state = it.get_state()
    taken = whole[:12]
    new = [iter(loader(i, 2)) for i in range(2)]
    if state["position"] % 2:
        with pytest.raises(GeometryError):
            new[0].set_state(state)
        return
    for n in new:
        n.set_state(state)
    rest = [x for n in new for b in n for x in b.tolist()]
    assert sorted(taken + rest) == sorted(whole)  # each kept record once: nothing skipped or repeated
