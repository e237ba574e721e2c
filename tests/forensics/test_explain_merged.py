"""``explain(step, process_index=p, ledger=DIR)`` after restarts on another number of processes
(``merge_states``) with a Filter before the Batch: what process p delivered at step t, as a training
loop that takes one batch from every process per step numbers its steps."""

from __future__ import annotations

import tempfile
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import thresher as th
from tests.forensics.test_audit import ledgered
from tests.forensics.test_exactly_once import Job, assert_exactly_once, checkpoint, jobs
from thresher.errors import ConfigError


def lockstep_job(job: Job, counts: list[int], steps: list[int], lost: list[list[int]],
                 workers: list[int]) -> dict[tuple[int, int], np.ndarray]:
    """Phases on ``counts`` processes; in phase k every process delivers up to ``steps[k]`` batches (one per
    training step), then a checkpoint; process i delivers ``lost[k][i]`` more before the preemption. The last
    phase runs to the end. Returns the batch of each (process, step) that the training loop kept."""
    kept: dict[tuple[int, int], np.ndarray] = {}
    state: dict[str, Any] | None = None
    T = 0
    for k, P in enumerate(counts):
        its = [iter(job.loader(i, P, workers[k])) for i in range(P)]
        if state is not None:
            for it in its:
                it.set_state(state)
        last = k == len(counts) - 1
        made = 0
        for i, it in enumerate(its):
            batches = list(it) if last else [b for b in (next(it, None) for _ in range(steps[k])) if b is not None]
            for j, b in enumerate(batches):
                kept[(i, T + j)] = np.asarray(b)
            made = max(made, len(batches))
        T += made
        if last:
            break
        state = checkpoint(its, lost[k])
    return kept


def check(job: Job, d: str, kept: dict[tuple[int, int], np.ndarray], counts: list[int]) -> None:
    loader = job.loader(0, 1)
    for (i, t), batch in kept.items():
        p = th.explain(loader, t, process_index=i, ledger=d)
        passed = [g for g, k in zip(p.global_positions.tolist(), p.record_keys.tolist(), strict=True)
                  if k not in job.dropped]
        assert passed == batch[:, 0].tolist(), (i, t)
        assert p.delivered == len(batch) and set(p.process_indices.tolist()) == {i}
    last = max((t for _, t in kept), default=-1)
    for i in range(max(counts)):
        for t in range(last + 1):
            if (i, t) not in kept:  # a process that had no batch at that step
                with pytest.raises(ConfigError, match=f"delivered no step {t}"):
                    th.explain(loader, t, process_index=i, ledger=d)
    for t in {t for _, t in kept}:
        everyone = th.explain(loader, t, ledger=d)
        assert sorted(set(everyone.process_indices.tolist())) == sorted(i for i, s in kept if s == t)


COUNT_SEQUENCES = [[4, 3], [3, 2], [4, 3, 2, 4], [2, 4, 1], [1, 3]]


@settings(max_examples=25, deadline=None)
@given(jobs, st.sampled_from(COUNT_SEQUENCES), st.data())
def test_explain_after_host_changes_gives_what_each_process_delivered(job: Job, counts: list[int],
                                                                       data: st.DataObject) -> None:
    steps = [data.draw(st.integers(0, 6), label=f"steps{k}") for k in range(len(counts))]
    lost = [data.draw(st.lists(st.integers(0, 2), min_size=P, max_size=P), label=f"lost{k}")
            for k, P in enumerate(counts)]
    d = tempfile.mkdtemp()
    kept = lockstep_job(ledgered(job, d), counts, steps, lost, [0] * len(counts))
    assert_exactly_once(job, list(kept.values()))
    check(job, d, kept, counts)
    report = th.audit(d)
    assert report.ok, str(report)
    assert report.frontier == job.num_records * job.num_epochs


def test_explain_after_host_changes_with_worker_processes() -> None:
    job = Job(num_records=70, num_epochs=2, seed=11, dropped=frozenset({3, 9, 40, 41, 42}), batch_size=3,
              chunk_size=8)
    d = tempfile.mkdtemp()
    counts = [4, 3, 2]
    kept = lockstep_job(ledgered(job, d), counts, [3, 4, 0], [[1, 0, 2, 0], [0, 2, 1], [0, 0]], [2, 0, 2])
    assert_exactly_once(job, list(kept.values()))
    check(job, d, kept, counts)
    assert th.audit(d).ok
