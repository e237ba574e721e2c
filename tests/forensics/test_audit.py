"""The ledger and the audit: every record of every epoch delivered exactly once, or what went wrong."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import thresher as th
from tests.forensics.test_exactly_once import COUNTS, Job, assert_exactly_once, jobs, run_job, schedule
from thresher.cli import main
from thresher.loader.ledger import decode_line, encode_line


def ledgered(job: Job, directory: str) -> Job:
    """The job, with every loader appending to the ledger in ``directory``."""

    class WithLedger(Job):
        def loader(self, i: int, P: int, workers: int = 0, **options):  # type: ignore[no-untyped-def]
            return super().loader(i, P, workers, ledger=directory, **options)

    return WithLedger(**job.__dict__)


@settings(max_examples=15, deadline=None)
@given(jobs, st.data())
def test_the_audit_agrees_with_a_job_with_preemptions_and_host_changes(job: Job, data: st.DataObject) -> None:
    steps, lost = schedule(data)
    d = tempfile.mkdtemp()
    kept = run_job(ledgered(job, d), COUNTS, steps, lost, [0] * len(COUNTS))
    assert_exactly_once(job, kept)
    report = th.audit(d)
    assert report.ok, str(report)
    assert report.frontier == job.num_records * job.num_epochs
    assert report.consumed == report.frontier and report.files == 4


def test_the_audit_with_real_worker_processes(tmp_path) -> None:
    job = ledgered(Job(97, 2, 11, frozenset(range(0, 97, 3)), 4, 8), str(tmp_path))
    kept = run_job(job, COUNTS, [[3, 5, 1, 4], [6, 2, 4], [3, 7], [0] * 4], [[1, 0, 2, 1], [0, 2, 1], [1, 1], [0] * 4],
                   [2, 0, 2, 2])
    assert_exactly_once(job, kept)
    assert th.audit(tmp_path).ok


def _two_shards(tmp_path, steps: tuple[int, int] = (3, 1)) -> tuple[Job, list[dict]]:
    job = ledgered(Job(40, 1, 3, frozenset({4, 9}), 2, 8), str(tmp_path))
    its = [iter(job.loader(i, 2)) for i in range(2)]
    for it, k in zip(its, steps, strict=True):
        for _ in range(k):
            next(it)
    return job, [it.get_state() for it in its]


def test_an_approximate_restart_shows_as_repeated_records(tmp_path) -> None:
    job, states = _two_shards(tmp_path)
    slow = th.loader.slowest_state(states)
    for i in range(3):
        it = iter(job.loader(i, 3))
        it.set_state(slow, allow_approximate=True)
        list(it)
    report = th.audit(tmp_path)
    assert not report.ok and report.repeated and not report.missed
    sampler = th.IndexSampler(40, shuffle=True, seed=3)
    for d in report.repeated:
        assert d["times"] == 2 and sampler[d["global_position"]].record_key == d["record_key"]
    assert "repeated: epoch 0 record key" in str(report)
    assert main(["audit", str(tmp_path)]) == 1


def test_a_process_left_out_of_a_restart_shows_as_missed_records(tmp_path) -> None:
    job, states = _two_shards(tmp_path)
    merged = th.merge_states(states)
    for i in (0, 2):  # process 1 of 3 never ran
        it = iter(job.loader(i, 3))
        it.set_state(merged)
        list(it)
    report = th.audit(tmp_path)
    assert not report.ok and report.missed and not report.repeated
    assert {d["global_position"] % 3 for d in report.missed} <= {1}


def test_planted_duplicate_and_gap_lines(tmp_path) -> None:
    job, _ = _two_shards(tmp_path, (0, 0))
    its = [iter(job.loader(i, 2)) for i in range(2)]
    for it in its:
        list(it)
    assert th.audit(tmp_path).ok
    path = os.path.join(tmp_path, "process-1.ledger")
    with open(path) as f:
        lines = f.readlines()
    step = next(i for i, x in enumerate(lines) if (decode_line(x) or {}).get("k") == "s")
    rec = decode_line(lines[step])
    assert rec is not None
    with open(path, "w") as f:  # the same step twice
        f.writelines(lines[:step + 1] + [lines[step]] + lines[step + 1:])
    report = th.audit(tmp_path)
    span = np.arange(rec["a"], rec["e"]) * 2 + 1
    assert sorted(d["global_position"] for d in report.repeated) == span.tolist()
    with open(path, "w") as f:  # the step gone
        f.writelines(lines[:step] + lines[step + 1:])
    report = th.audit(tmp_path)
    assert not report.repeated and sorted(d["global_position"] for d in report.missed) == span.tolist()
    out = json.loads(_cli_json(str(tmp_path)))
    assert out["ok"] is False and len(out["missed"]) == len(span)


def _cli_json(directory: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "thresher", "audit", directory, "--json"], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    return proc.stdout


def test_skipped_steps_and_blocked_records_are_accounted_for(tmp_path) -> None:
    loader = th.DataLoader(th.sources.RangeDataSource(0, 30), th.IndexSampler(30, shuffle=True, seed=2),
                           [th.Batch(3)], ledger=tmp_path)
    it = iter(loader)
    next(it)
    state = it.get_state()
    next(it)  # lost: the run resumes from the state above
    again = iter(loader)
    again.set_state(state, skip_steps=range(4, 6), skip_records=[7, 8])
    list(again)
    report = th.audit(tmp_path)
    assert report.ok, str(report)
    assert (report.skipped, report.blocked, report.frontier) == (6, 2, 30)
    assert main(["audit", str(tmp_path)]) == 0


KILLED = """
import sys, thresher as th
loader = th.DataLoader(th.sources.RangeDataSource(0, 1000), th.IndexSampler(1000, num_epochs=None),
                       [th.Batch(2)], ledger=sys.argv[1])
it = iter(loader)
print("go", flush=True)
for t, _ in enumerate(it):
    if t % 50 == 0:
        it.get_state()
"""


def test_a_killed_process_leaves_whole_lines(tmp_path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", KILLED, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "go\n"
        time.sleep(1.0)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    with open(os.path.join(tmp_path, "process-0.ledger")) as f:
        lines = f.readlines()
    assert len(lines) > 100
    assert all(decode_line(x) is not None for x in lines[:-1])
    report = th.audit(tmp_path)
    assert report.ok and report.torn_lines <= 1 and report.frontier >= 200


def test_a_torn_last_line_is_ignored(tmp_path) -> None:
    loader = th.DataLoader(th.sources.RangeDataSource(0, 10), th.IndexSampler(10), [th.Batch(2)], ledger=tmp_path)
    it = iter(loader)
    next(it)
    next(it)
    with open(os.path.join(tmp_path, "process-0.ledger"), "ab") as f:
        f.write(encode_line({"k": "s", "t": 2, "a": 4, "e": 6, "n": 2})[:-7])
    report = th.audit(tmp_path)
    assert report.ok and report.torn_lines == 1 and report.frontier == 4


def test_a_ledger_turned_on_mid_run_or_after_a_restart(tmp_path) -> None:
    """What was consumed before the ledger began is taken from its begin lines, not reported missed."""
    it = iter(th.DataLoader(th.sources.RangeDataSource(0, 20), th.IndexSampler(20), [th.Batch(2)]))
    next(it)
    next(it)
    it.ledger(tmp_path / "mid")
    list(it)
    report = th.audit(tmp_path / "mid")
    assert report.ok and report.before_ledger == 4 and report.consumed == 16
    job = Job(40, 1, 3, frozenset({4, 9}), 2, 8)  # no ledger before the restart
    its = [iter(job.loader(i, 2)) for i in range(2)]
    for it, k in zip(its, (3, 1), strict=True):
        for _ in range(k):
            next(it)
    merged = th.merge_states([it.get_state() for it in its])
    d = str(tmp_path / "after")
    for i in range(3):
        it = iter(job.loader(i, 3))
        it.set_state(merged)
        it.ledger(d)  # begins at the next step
        list(it)
    report = th.audit(d)
    assert report.ok and report.before_ledger > 0 and report.frontier == 40
