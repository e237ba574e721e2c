"""Exactly once across preemptions and changes of the process count, with a Filter before the Batch.

A simulated job runs on 4, then 3, then 2, then 4 processes (each "process" an iterator
with its shard; one test with real worker processes). At each checkpoint the states of
all processes are merged (``merge_states``); some processes go on delivering after the
checkpoint and are preempted, so those batches are lost, as a restored training state
loses them. Elements carry their global position, so each delivery names its epoch and
record: every record that passes the filter must be delivered exactly once per epoch.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import thresher as th
from thresher.errors import GeometryError, InvalidStateError


class Tag:
    """(global position, record) for each element."""

    def __call__(self, g: int, x: int) -> np.ndarray:
        return np.array([g, x], dtype=np.int64)


class Keep:
    def __init__(self, dropped: frozenset[int]) -> None:
        self.dropped = dropped

    def __call__(self, e: np.ndarray) -> bool:
        return int(e[1]) not in self.dropped


@dataclass(frozen=True)
class Job:
    num_records: int
    num_epochs: int
    seed: int
    dropped: frozenset[int]
    batch_size: int
    chunk_size: int

    def loader(self, i: int, P: int, workers: int = 0, **options: Any) -> th.DataLoader:
        sampler = th.IndexSampler(self.num_records, shuffle=True, seed=self.seed, num_epochs=self.num_epochs,
                                  shard_options=th.ShardOptions(i, P))
        ops = [th.MapWithIndexTransform(Tag()), th.FilterTransform(Keep(self.dropped)), th.Batch(self.batch_size)]
        return th.DataLoader(th.sources.RangeDataSource(0, self.num_records), sampler, ops, worker_count=workers,
                             chunk_size=self.chunk_size, **options)


def expected_positions(job: Job) -> list[int]:
    sampler = th.IndexSampler(job.num_records, shuffle=True, seed=job.seed, num_epochs=job.num_epochs)
    keys, _ = sampler.record_keys(np.arange(job.num_records * job.num_epochs, dtype=np.int64))
    return [g for g, k in enumerate(keys.tolist()) if k not in job.dropped]


def run_job(job: Job, counts: list[int], steps: list[list[int]], lost: list[list[int]],
            workers: list[int]) -> list[np.ndarray]:
    """Phases on ``counts`` processes; process i of phase k delivers ``steps[k][i]`` batches before the
    checkpoint and ``lost[k][i]`` more before it is preempted. The last phase runs to the end."""
    kept: list[np.ndarray] = []
    state: dict[str, Any] | None = None
    for k, P in enumerate(counts):
        its = [iter(job.loader(i, P, workers[k])) for i in range(P)]
        if state is not None:
            for it in its:
                it.set_state(state)
        last = k == len(counts) - 1
        for i, it in enumerate(its):
            for b in (it if last else (next(it, None) for _ in range(steps[k][i]))):
                if b is not None:
                    kept.append(np.asarray(b))
        if last:
            break
        state = checkpoint(its, lost[k])
    return kept


def checkpoint(its: list[Any], lost: list[int]) -> dict[str, Any]:
    """The merged state of all processes; then process i delivers ``lost[i]`` more batches (lost to a
    preemption with the training state) and stops."""
    states = [json.loads(json.dumps(it.get_state())) for it in its]
    for i, it in enumerate(its):
        for _ in range(lost[i]):
            next(it, None)
        it.close()
    state = json.loads(json.dumps(th.merge_states(states[::-1])))
    assert len(json.dumps(state)) < 2048
    return state


def assert_exactly_once(job: Job, kept: list[np.ndarray]) -> None:
    rows = np.concatenate(kept) if kept else np.zeros((0, 2), dtype=np.int64)
    got = sorted(rows[:, 0].tolist())
    want = expected_positions(job)
    repeated = sorted({g for g in got if got.count(g) > 1})
    missed = sorted(set(want) - set(got))
    assert not repeated and not missed, f"repeated {repeated[:10]}, missed {missed[:10]}"
    assert got == want


jobs = st.builds(Job, num_records=st.integers(10, 80), num_epochs=st.integers(1, 2), seed=st.integers(0, 2**32),
                 dropped=st.frozensets(st.integers(0, 79), max_size=30), batch_size=st.integers(1, 5),
                 chunk_size=st.sampled_from([3, 8, 64]))
COUNTS = [4, 3, 2, 4]


def schedule(data: st.DataObject) -> tuple[list[list[int]], list[list[int]]]:
    """Per phase and process: batches before the checkpoint, and batches lost after it."""
    steps = [data.draw(st.lists(st.integers(0, 8), min_size=P, max_size=P), label=f"steps{k}")
             for k, P in enumerate(COUNTS)]
    lost = [data.draw(st.lists(st.integers(0, 2), min_size=P, max_size=P), label=f"lost{k}")
            for k, P in enumerate(COUNTS)]
    return steps, lost


@settings(max_examples=40, deadline=None)
@given(jobs, st.data())
def test_a_job_with_preemptions_and_host_changes_delivers_each_record_once(job: Job, data: st.DataObject) -> None:
    steps, lost = schedule(data)
    assert_exactly_once(job, run_job(job, COUNTS, steps, lost, [0] * len(COUNTS)))


def test_with_real_worker_processes() -> None:
    job = Job(97, 2, 11, frozenset(range(0, 97, 3)), 4, 8)
    steps = [[3, 5, 1, 4], [6, 2, 4], [3, 7]]
    lost = [[1, 0, 2, 1], [0, 2, 1], [1, 1]]
    kept = run_job(job, COUNTS, steps + [[0] * 4], lost + [[0] * 4], [2, 0, 2, 2])
    assert_exactly_once(job, kept)


def test_a_merged_state_keeps_only_what_is_in_flight() -> None:
    """The layers of old host changes go once the watermark has passed them."""
    job = Job(60, 3, 1, frozenset({1, 2}), 2, 8)
    state = None
    for P, k in [(4, 3), (3, 2), (2, 40)]:
        its = [iter(job.loader(i, P)) for i in range(P)]
        for i, it in enumerate(its):
            if state is not None:
                it.set_state(state)
            for _ in range(k + i):
                next(it, None)
        state = th.merge_states([it.get_state() for it in its])
    assert len(state["dataset"]["consumed"]["layers"]) == 1   # only the last geometry's


def test_merge_states_refuses_partial_and_mixed_sets() -> None:
    job = Job(40, 1, 1, frozenset(), 2, 8)
    its = [iter(job.loader(i, 3)) for i in range(3)]
    states = [it.get_state() for it in its]
    with pytest.raises(InvalidStateError, match=r"shards \[2\] are missing"):
        th.merge_states(states[:2])
    merged = th.merge_states(states)
    with pytest.raises(InvalidStateError, match="already merged"):
        th.merge_states([merged] * 3)
    it = iter(job.loader(0, 2))
    it.set_state(merged)
    with pytest.raises(GeometryError, match="merge_states"):
        iter(job.loader(1, 3)).set_state(it.get_state())    # one process's state after a host change
    bad = json.loads(json.dumps(merged))
    bad["dataset"]["consumed"]["layers"][0]["next"] = [2**63, 0, 0]
    with pytest.raises(InvalidStateError, match="consumed"):
        iter(job.loader(0, 2)).set_state(bad)
