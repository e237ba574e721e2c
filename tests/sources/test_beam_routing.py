"""Routing records to shards by a plan of bucket counts, at the boundary conditions (no Beam).

Issue #19's benchmark once refused a shard ("got 2 of the 3 records of bucket 16379"). These
tests drive ``Plan.shards_of`` (what the Route step sends) and ``Plan.place`` (what a shard
writer keeps) over all 65,536 buckets with shard bounds that fall inside buckets, on their
first or last record, between buckets, on empty buckets, and with skewed counts, and check
that every record lands in exactly one shard at its planned position, and that a record or a
bucket that does not arrive is refused with a message naming the shard, the bucket and the
counts.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from thresher.errors import ConfigError
from thresher.sources.formats.prepared.keys import key_bytes, sort_key
from thresher.sources.write.plan import NUM_BUCKETS, Plan, hash_bucket
from thresher.sources.write.local import shuffle_key

Routed = tuple[int, bytes, bytes]


def _records(counts: dict[int, int]) -> list[Routed]:
    """Records whose sort keys fall in the given buckets (leading 16 bits), in sorted order."""
    out = []
    for b in sorted(counts):
        for j in range(counts[b]):
            sk = b.to_bytes(2, "big") + j.to_bytes(6, "big") + b"k"
            assert hash_bucket(sk) == b
            out.append((b, sk, b"r%d.%d" % (b, j)))
    return out


def _plan(counts: dict[int, int], num_shards: int | None, nbytes: int = 0) -> Plan:
    arr = np.zeros(NUM_BUCKETS, np.int64)
    for b, c in counts.items():
        arr[b] = c
    return Plan(arr, nbytes, num_shards)


def _route(plan: Plan, records: list[Routed], seed: int) -> dict[int, list[Routed]]:
    """What the Route step and the GroupByKey deliver: each record to each shard of its bucket."""
    shuffled = records[:]
    random.Random(seed).shuffle(shuffled)  # arrival order must not matter
    groups: dict[int, list[Routed]] = {}
    for r in shuffled:
        for s in plan.shards_of(r[0]):
            groups.setdefault(s, []).append(r)
    return groups


# Buckets anywhere among the 65,536 (the ends included), with counts from 1 to skewed.
_counts = st.dictionaries(st.one_of(st.integers(0, NUM_BUCKETS - 1), st.sampled_from([0, 1, 16379, 16384,
                                                                                       NUM_BUCKETS - 1])),
                          st.one_of(st.integers(1, 4), st.integers(1, 300)), max_size=60)


@settings(max_examples=150, deadline=None)
@given(counts=_counts, shards=st.integers(1, 80), seed=st.integers(0, 2**32 - 1))
def test_every_record_lands_in_exactly_one_shard_at_its_planned_position(counts, shards, seed) -> None:
    records = _records(counts)
    plan = _plan(counts, shards)
    groups = _route(plan, records, seed)
    assert set(groups) <= set(range(plan.num_shards))
    placed: list[tuple[int, bytes]] = []
    for s in range(plan.num_shards):
        got = list(plan.place(s, groups.get(s, []), "train"))
        assert [p for p, _ in got] == list(range(plan.bounds[s], plan.bounds[s + 1]))
        placed += got
    assert placed == [(i, r) for i, (_, _, r) in enumerate(records)]  # each once, in sort-key order
    # a shard writer holds its own records plus at most its two edge buckets
    for s, group in groups.items():
        own = plan.bounds[s + 1] - plan.bounds[s]
        edge = sorted((counts[b] for b in {r[0] for r in group}), reverse=True)[:2]
        assert len(group) <= own + sum(edge)


@settings(max_examples=100, deadline=None)
@given(per_bucket=st.integers(1, 6), buckets=st.integers(1, 40), shards=st.integers(1, 40),
       offset=st.integers(0, NUM_BUCKETS - 41))
def test_shard_bounds_on_bucket_edges_route_each_bucket_to_one_shard(per_bucket, buckets, shards,
                                                                      offset) -> None:
    # equal counts: with shards dividing the buckets, every bound falls exactly between buckets
    counts = {offset + i: per_bucket for i in range(buckets)}
    plan = _plan(counts, shards)
    for b in counts:
        lo, hi = int(plan.starts[b]), int(plan.starts[b + 1])
        expect = sorted({plan.shard_of(p) for p in range(lo, hi)})
        assert list(plan.shards_of(b)) == expect
    for b in range(NUM_BUCKETS):  # empty buckets go nowhere
        if b not in counts:
            assert list(plan.shards_of(b)) == []


def test_the_failing_benchmark_bucket_is_inside_its_shard() -> None:
    # benchmarks/beam_prepare --sizes 400000: keys 0..399999 of split "train", 16 shards of
    # 25,000. Bucket 16379 holds 3 records at positions [100187, 100190): inside shard 4, not
    # an edge bucket, so the Route step sends its records to shard 4 only.
    key = shuffle_key("train")
    arr = np.zeros(NUM_BUCKETS, np.int64)
    for i in range(400_000):
        arr[hash_bucket(sort_key(key, key_bytes(i), shuffle=True))] += 1
    plan = Plan(arr, 400_000 * 800, 16)
    assert plan.bounds[4:6] == [100_000, 125_000]
    assert (int(arr[16379]), int(plan.starts[16379])) == (3, 100_187)
    assert list(plan.shards_of(16379)) == [4]


@settings(max_examples=60, deadline=None)
@given(counts=_counts.filter(lambda c: sum(c.values()) >= 2), shards=st.integers(1, 30),
       seed=st.integers(0, 2**32 - 1), data=st.data())
def test_a_lost_record_or_bucket_is_refused_naming_shard_bucket_and_counts(counts, shards, seed, data) -> None:
    records = _records(counts)
    plan = _plan(counts, shards)
    groups = _route(plan, records, seed)
    s = data.draw(st.sampled_from(sorted(groups)))
    group = groups[s]
    own = [r for r in group  # the records whose planned position is in shard s
           if plan.bounds[s] <= int(plan.starts[r[0]]) + int.from_bytes(r[1][2:8], "big") < plan.bounds[s + 1]]
    lost = data.draw(st.sampled_from(own))
    whole = data.draw(st.booleans())  # the whole bucket, or one record of it
    kept = [r for r in group if (r[0] != lost[0] if whole else r != lost)]
    planned = counts[lost[0]]
    with pytest.raises(ConfigError) as e:
        list(plan.place(s, kept, "train"))
    msg = str(e.value)
    assert f"shard {s} of {plan.num_shards} got {0 if whole else planned - 1} of the {planned} records " \
           f"of bucket {lost[0]} " in msg
    assert "Nothing was committed; run the pipeline again" in msg
