"""errors="skip": failing records are dropped deterministically, logged, counted, and limited."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys

import pytest
from hypothesis import given, settings, strategies as st

import thresher as th
from tests.forensics.pipelines import BadSpec, FailOn, FlakySource, bad_specs
from thresher.errors import ConfigError, TransformError

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def keys_of(batches: list[list[int]]) -> list[int]:
    return [x % 1000 for b in batches for x in b]


def expected(spec: BadSpec, shard: int) -> tuple[list[int], list[int]]:
    """(delivered keys, dropped keys) of a shard, from the sampler alone."""
    sampler = spec.loader(shard).sampler
    stream = [sampler[p].record_key for p in range(len(sampler))]
    bad = spec.bad_reads | spec.bad_maps
    return [k for k in stream if k not in bad], [k for k in stream if k in bad]


@settings(max_examples=40, deadline=None)
@given(bad_specs, st.sampled_from([0, 0, 0, 2]))
def test_the_same_records_are_dropped_for_every_worker_count(spec: BadSpec, workers: int) -> None:
    for i in range(spec.shard_count):
        it = iter(spec.loader(i, workers))
        batches = [b.tolist() for b in it]
        want, dropped = expected(spec, i)
        assert keys_of(batches) == want
        assert all(len(b) == spec.batch_size for b in batches[:-1])
        assert [d.record_key for d in it.skipped_records] == dropped
        assert it.stats().skipped_records == len(dropped)
        for d in it.skipped_records:
            assert d.stage == ("read" if d.record_key in spec.bad_reads else "Map(FailOn)")
            assert spec.loader(i).sampler[d.position].global_position == d.global_position


@settings(max_examples=8, deadline=None)
@given(bad_specs, st.data())
def test_resume_in_a_fresh_process_drops_the_same_records(spec: BadSpec, data: st.DataObject) -> None:
    shard = data.draw(st.integers(0, spec.shard_count - 1), label="shard")
    full_it = iter(spec.loader(shard))
    full = [b.tolist() for b in full_it]
    stop = data.draw(st.integers(0, len(full)), label="stop")
    it = iter(spec.loader(shard))
    for _ in range(stop):
        next(it)
    state = it.get_state()
    workers = data.draw(st.sampled_from([0, 2]), label="workers")
    fields = {**spec.__dict__, "bad_reads": sorted(spec.bad_reads), "bad_maps": sorted(spec.bad_maps)}
    out = subprocess.run([sys.executable, "-m", "tests.forensics.bad_records_main",
                          json.dumps([fields, state, shard, workers])],
                         cwd=REPO, capture_output=True, text=True, check=True)
    got = json.loads(out.stdout)
    assert got["batches"] == full[stop:]
    position = state["position"]
    assert got["dropped"] == [d.record_key for d in full_it.skipped_records if d.position >= position]


def test_drops_are_logged_with_key_file_position_and_error(tmp_path: object,
                                                           caplog: pytest.LogCaptureFixture) -> None:
    path = os.path.join(str(tmp_path), "data.array_record")
    th.sources.write_array_record(path, [str(i).encode() for i in range(10)])

    def parse(b: bytes) -> int:
        if b == b"4":
            raise ValueError("truncated example")
        return int(b)

    loader = th.DataLoader(th.sources.ArrayRecordSource(path), th.IndexSampler(10), [parse, th.Batch(3)],
                           errors="skip")
    with caplog.at_level(logging.WARNING, logger="thresher"):
        batches = [b.tolist() for b in loader]
    assert batches == [[0, 1, 2], [3, 5, 6], [7, 8, 9]]
    (message,) = [r.getMessage() for r in caplog.records if "dropped" in r.getMessage()]
    assert "record key 4" in message and path in message and "position 4" in message
    assert "ValueError: truncated example" in message


def test_past_max_skipped_it_raises() -> None:
    source = FlakySource(30, frozenset({3, 11, 12, 20}))
    ops = [th.Batch(4)]
    it = iter(th.DataLoader(source, th.IndexSampler(30), ops, errors="skip", max_skipped=3, chunk_size=8))
    with pytest.raises(TransformError, match="dropped 4 records, more than max_skipped=3.*record key 20"):
        list(it)
    it = iter(th.DataLoader(source, th.IndexSampler(30), ops, errors="skip", max_skipped=0.1, chunk_size=8))
    with pytest.raises(TransformError, match="dropped 3 records, more than 10.00% of the 16 positions"):
        list(it)
    assert len(list(th.DataLoader(source, th.IndexSampler(30), ops, errors="skip", max_skipped=4))) == 7
    with pytest.raises(OSError, match="checksum mismatch in record 3"):  # the default: raise, as before
        list(th.DataLoader(source, th.IndexSampler(30), [FailOn(frozenset()), th.Batch(4)]))


def test_policy_options_are_checked() -> None:
    source, sampler = th.sources.RangeDataSource(0, 4), th.IndexSampler(4)
    with pytest.raises(ConfigError, match="errors must be"):
        th.DataLoader(source, sampler, errors="ignore")
    with pytest.raises(ConfigError, match="max_skipped needs errors='skip'"):
        th.DataLoader(source, sampler, max_skipped=3)
    with pytest.raises(ConfigError, match=r"fraction must be in \[0, 1\)"):
        th.DataLoader(source, sampler, errors="skip", max_skipped=1.5)
    loader = th.DataLoader(source, sampler, [th.Batch(2)], errors="skip")
    with pytest.raises(ConfigError, match="errors='skip'"):
        th.explain(loader, 0)
