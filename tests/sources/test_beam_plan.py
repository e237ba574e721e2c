"""The plan that routes keyed records to shards without holding a split (no Beam needed)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from thresher.errors import ConfigError
from thresher.sources.formats.prepared.keys import key_bytes, sort_key
from thresher.sources.write.plan import EDGES, NUM_BUCKETS, Plan, edge_bucket, hash_bucket
from thresher.sources.write.local import shard_bounds, shuffle_key


def _routed(keys: list[int], shuffle: bool, edges: list[bytes]) -> list[tuple[int, bytes, bytes]]:
    out = []
    for k in keys:
        sk = sort_key(shuffle_key("train"), key_bytes(k), shuffle=shuffle)
        out.append((hash_bucket(sk) if shuffle else edge_bucket(edges, sk), sk, b"rec%d" % k))
    return out


def _plan(routed: list[tuple[int, bytes, bytes]], num_shards: int | None) -> Plan:
    counts = np.zeros(NUM_BUCKETS, np.int64)
    for b, _, _ in routed:
        counts[b] += 1
    return Plan(counts, sum(len(r) for _, _, r in routed), num_shards)


def _by_shard(plan: Plan, routed: list[tuple[int, bytes, bytes]]) -> dict[int, list[tuple[int, bytes, bytes]]]:
    groups: dict[int, list[tuple[int, bytes, bytes]]] = {}
    for r in reversed(routed):  # arrival order must not matter
        for s in plan.shards_of(r[0]):
            groups.setdefault(s, []).append(r)
    return groups


@settings(max_examples=40, deadline=None)
@given(keys=st.lists(st.integers(-2**63, 2**63 - 1), unique=True, max_size=300),
       shards=st.integers(1, 40), shuffle=st.booleans(), every=st.integers(1, 50))
def test_routing_then_placing_gives_every_shard_exactly_its_records_in_sorted_order(keys, shards, shuffle,
                                                                                    every) -> None:
    sks = sorted(sort_key(shuffle_key("train"), key_bytes(k), shuffle=shuffle) for k in keys)
    edges = sks[::every] + sks[-1:]  # any sorted sample of the keys works as quantile edges
    routed = _routed(keys, shuffle, edges)
    plan = _plan(routed, shards)
    assert plan.bounds == shard_bounds(len(keys), plan.nbytes, shards)
    groups = _by_shard(plan, routed)
    placed = []
    for s in range(plan.num_shards):
        got = list(plan.place(s, groups.get(s, []), "train", shuffle))
        assert [p for p, _ in got] == list(range(plan.bounds[s], plan.bounds[s + 1]))
        placed += [r for _, r in got]
    by_sk = {sk: r for _, sk, r in routed}
    assert placed == [by_sk[sk] for sk in sks]  # the global order is the sort keys' order


def test_a_shard_holds_itself_plus_at_most_its_two_edge_buckets() -> None:
    keys = list(range(20_000))
    routed = _routed(keys, True, [])
    plan = _plan(routed, 50)
    biggest = int(np.max(np.diff(plan.starts)))
    for s, group in _by_shard(plan, routed).items():
        assert len(group) <= plan.bounds[s + 1] - plan.bounds[s] + 2 * biggest
    # shuffle=False with keys 0, 1, 2, ...: their bytes share all but the last ones; quantile
    # edges still cut them into small buckets
    sks = sorted(sort_key(0, key_bytes(k), shuffle=False) for k in keys)
    edges = [sks[round(i * (len(sks) - 1) / (EDGES - 1))] for i in range(EDGES)]
    plan = _plan(_routed(keys, False, edges), 50)
    assert int(np.max(np.diff(plan.starts))) <= 2 * len(keys) // (EDGES - 1)


def test_lost_or_duplicated_records_are_errors() -> None:
    routed = _routed(list(range(100)), True, [])
    plan = _plan(routed, 4)
    group = _by_shard(plan, routed)[1]
    with pytest.raises(ConfigError, match="shard 1 of 4 got 0 of the 1 records of bucket"):
        list(plan.place(1, group[1:], "train"))
    with pytest.raises(ConfigError, match="two examples have the key"):  # a record delivered twice
        list(plan.place(1, group + group[:1], "train"))
    b, sk, r = group[0]
    twin = [(b, sk, r), (b, sk, b"other")] + [g for g in group if g[1] != sk]
    with pytest.raises(ConfigError, match="two examples have the key"):
        list(plan.place(1, twin, "train"))
