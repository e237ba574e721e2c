"""Spill runs and the byte ranges that the file exchange of thresher.beam routes (no pipeline here)."""

from __future__ import annotations

import os
import uuid

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from thresher.sources.write.beam.files import _CountRuns, _ranges, _WriteShardFromRuns
from thresher.sources.write.beam.shards import bucket_function
from thresher.errors import CorruptSourceError
from thresher.sources.formats.prepared.keys import key_bytes, sort_key
from thresher.sources.write.spill import index_run, read_range, remove_tree, write_run
from thresher.sources.write.local import shard_bounds, shuffle_key


def _records(keys: list[int], shuffle: bool) -> list[tuple[bytes, bytes]]:
    return [(sort_key(shuffle_key("train"), key_bytes(k), shuffle=shuffle), b"r%d" % k * (k % 4)) for k in keys]


@settings(max_examples=30, deadline=None)
@given(keys=st.lists(st.integers(-2**63, 2**63 - 1), unique=True, max_size=200),
       cuts=st.lists(st.integers(0, 200), max_size=6), shards=st.integers(1, 30), shuffle=st.booleans(),
       every=st.integers(1, 40))
def test_runs_then_ranges_give_every_shard_exactly_its_records_in_sorted_order(tmp_path_factory, keys, cuts,
                                                                               shards, shuffle, every) -> None:
    d = str(tmp_path_factory.mktemp("spill"))
    records = _records(keys, shuffle)
    sks = sorted(sk for sk, _ in records)
    edges = None if shuffle else sks[::every] + sks[-1:]  # any sorted sample works as quantile edges
    bounds = sorted({0, len(records), *[min(c, len(records)) for c in cuts]})
    runs = [write_run(os.path.join(d, f"run{i}"), records[a:b]) for i, (a, b) in enumerate(zip(bounds, bounds[1:]))]
    indexes = [index_run(r, bucket_function(edges)) for r in runs]
    count = _CountRuns(shards)
    plan = count.extract_output(count.merge_accumulators(
        [count.add_input(count.create_accumulator(), idx) for idx in indexes] or [count.create_accumulator()]))
    assert plan.bounds == shard_bounds(len(keys), sum(len(r) for _, r in records), shards)
    groups: dict[int, list[tuple[str, int, int, int]]] = {}
    for idx in reversed(indexes):  # the order in which ranges arrive must not matter
        for shard, rng in _ranges(idx, plan):
            groups.setdefault(shard, []).append(rng)
    writer = _WriteShardFromRuns(d, "ds", "train", shuffle, None)
    placed = []
    for s in range(plan.num_shards):
        assert len(groups.get(s, [])) <= len(runs)  # one byte range per run at most
        got = list(plan.place(s, writer.gather(groups.get(s, []), edges), "train", shuffle))
        assert [p for p, _ in got] == list(range(plan.bounds[s], plan.bounds[s + 1]))
        placed += [r for _, r in got]
    by_sk = dict(records)
    assert placed == [by_sk[sk] for sk in sks]


def test_a_run_that_does_not_match_its_index_is_refused(tmp_path) -> None:
    run = write_run(str(tmp_path / "r"), _records(list(range(50)), True))
    idx = index_run(run, bucket_function(None))
    end = int(idx.offsets[-1])
    assert [len(list(read_range(run.path, 0, end, 50)))] == [50]
    with pytest.raises(CorruptSourceError, match="hold 50 whole records, the index says 49"):
        list(read_range(run.path, 0, end, 49))
    with pytest.raises(CorruptSourceError, match="hold 49 whole records"):  # a cut through a record
        list(read_range(run.path, 0, end - 1, 50))
    with open(run.path, "r+b") as f:
        f.truncate(end - 10)
    with pytest.raises(CorruptSourceError, match="shorter than expected"):
        list(read_range(run.path, 0, end, 50))
    os.remove(run.path + ".keys")
    with pytest.raises(CorruptSourceError, match="r.keys.* cannot be read"):
        index_run(run, bucket_function(None))
    remove_tree(str(tmp_path))
    remove_tree(str(tmp_path))  # already gone: fine
    assert not os.path.exists(tmp_path)


def test_runs_on_an_fsspec_url_are_written_read_and_removed() -> None:
    import fsspec

    root = f"memory://spill-{uuid.uuid4().hex}"
    records = _records(list(range(30)), False)
    run = write_run(f"{root}/one/r0", list(records))
    idx = index_run(run, bucket_function([records[0][0], records[10][0], records[29][0]]))
    assert idx.buckets.tolist() == [0, 1] and idx.counts.tolist() == [10, 20]
    tail = list(read_range(run.path, int(idx.offsets[1]), int(idx.offsets[2]), 20))
    assert tail == sorted(records)[10:]
    fs = fsspec.filesystem("memory")
    assert len(fs.find(root.removeprefix("memory://"))) == 2  # the run and its keys
    remove_tree(root)
    assert not fs.exists(root.removeprefix("memory://"))
    assert np.array_equal(idx.offsets[:1], [0])
