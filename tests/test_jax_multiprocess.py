"""Real multi-process JAX runs on localhost: global batches, Orbax checkpoints, elastic resume.

Each run starts N processes of ``tests/jax_multiprocess_main.py`` that join one
``jax.distributed`` job on 127.0.0.1 (CPU, 2 devices per process, gloo collectives)
and read their shards of one ArrayRecord file through ``thresher.jax.global_batches``.
Every process is started in its own process group and the groups are SIGKILLed in
``finally``: nothing outlives a test.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import thresher as th
from tests.helpers import REPO, make_records
from tests.jax_multiprocess_main import build_loader

import jax  # noqa: E402,F401  (the test extra has these: a missing one fails)
import orbax.checkpoint  # noqa: E402,F401

NUM_RECORDS = 200
GLOBAL_BATCH = 16
STEPS = 25  # two epochs of 200 records in global batches of 16 (drop_remainder)
RUN_TIMEOUT_S = 150


WORKER_COUNTS = [0, pytest.param(2, id="workers2")]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Job:
    """N processes of one jax.distributed job; ``kill()`` SIGKILLs their process groups."""

    def __init__(self, tmp: str, name: str, n: int, cfg: dict[str, Any]) -> None:
        self.out = os.path.join(tmp, name)
        os.makedirs(self.out)
        self.n = n
        self.cfg = dict(cfg, port=_free_port(), num_processes=n, out=self.out)
        env = dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS="--xla_force_host_platform_device_count=2",
                   PYTHONPATH=REPO, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
        self.procs: list[subprocess.Popen[bytes]] = []
        for i in range(n):
            with open(os.path.join(self.out, f"output-{i}.txt"), "wb") as log:
                self.procs.append(subprocess.Popen(
                    [sys.executable, "-m", "tests.jax_multiprocess_main", str(i), json.dumps(self.cfg)],
                    cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True))

    def output(self, i: int) -> str:
        with open(os.path.join(self.out, f"output-{i}.txt"), errors="replace") as f:
            return f.read()

    def wait(self, timeout: float = RUN_TIMEOUT_S) -> list[int]:
        deadline = time.monotonic() + timeout
        codes = []
        for p in self.procs:
            try:
                codes.append(p.wait(timeout=max(0.1, deadline - time.monotonic())))
            except subprocess.TimeoutExpired:
                self.kill()
                raise AssertionError(f"job {self.out} did not finish in {timeout}s:\n" + self.output(0)[-3000:])
        return codes

    def ok(self) -> Job:
        codes = self.wait()
        if any(codes):
            bad = next(i for i, c in enumerate(codes) if c)
            raise AssertionError(f"process {bad} of {self.out} exited with {codes}:\n{self.output(bad)[-4000:]}")
        return self

    def wait_for_files(self, prefix: str, timeout: float = RUN_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout
        while not all(os.path.exists(os.path.join(self.out, f"{prefix}-{i}")) for i in range(self.n)):
            for i, p in enumerate(self.procs):
                if p.poll() is not None:
                    raise AssertionError(f"process {i} exited with {p.returncode}:\n{self.output(i)[-4000:]}")
            if time.monotonic() > deadline:
                raise AssertionError(f"no {prefix} files after {timeout}s")
            time.sleep(0.05)

    def kill(self) -> None:
        for p in self.procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)  # the process group holds the process and its workers
            except ProcessLookupError:
                pass
        for p in self.procs:
            p.wait()

    def alive_groups(self) -> list[int]:
        alive = []
        for p in self.procs:
            try:
                os.killpg(p.pid, 0)
                alive.append(p.pid)
            except ProcessLookupError:
                pass
        return alive

    def steps(self, i: int = 0) -> list[dict[str, Any]]:
        with open(os.path.join(self.out, f"steps-{i}.jsonl")) as f:
            # a line cut short by SIGKILL has no newline yet: it was never completed
            return [json.loads(line) for line in f if line.endswith("\n")]

    def all_steps(self, killed: bool = False) -> list[dict[str, Any]]:
        """The steps of process 0, after checking that every process saw the same global batches.

        ``killed``: the processes were SIGKILLed at slightly different steps; compare the
        steps they all completed.
        """
        runs = [self.steps(i) for i in range(self.n)]
        common = min(len(r) for r in runs) if killed else len(runs[0])
        first = runs[0][:common]
        for i in range(1, self.n):
            other = runs[i][:common] if killed else runs[i]
            assert [(r["step"], r["global"], r["params"]) for r in other] == \
                   [(r["step"], r["global"], r["params"]) for r in first], f"process {i} disagrees with 0"
        return first

    def file(self, name: str) -> Any:
        with open(os.path.join(self.out, name)) as f:
            return f.read()


@pytest.fixture
def jobs(tmp_path: Any) -> Iterator[list[Job]]:
    started: list[Job] = []
    try:
        yield started
    finally:
        for job in started:
            job.kill()


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: Any) -> str:
    path = str(tmp_path_factory.mktemp("data") / "records.array_record")
    th.sources.write_array_record(path, make_records(NUM_RECORDS))
    return path


def _cfg(dataset: str, **kw: Any) -> dict[str, Any]:
    cfg = dict(path=dataset, num_records=NUM_RECORDS, num_epochs=2, seed=5, global_batch=GLOBAL_BATCH,
               steps=STEPS, heartbeat_s=10)
    cfg.update(kw)
    return cfg


def _expected_keys(cfg: dict[str, Any]) -> list[list[int]]:
    """The global batches' record keys, computed in this process with one shard (no JAX)."""
    loader = build_loader(cfg, th.ShardOptions(0, 1, drop_remainder=True))
    return [np.asarray(b["key"]).tolist() for b in loader][:cfg["steps"]]


@pytest.fixture(scope="module")
def reference(dataset: str, tmp_path_factory: Any) -> list[dict[str, Any]]:
    """The uninterrupted single-process run: the global batches every other run must reproduce."""
    job = Job(str(tmp_path_factory.mktemp("ref")), "n1", 1, _cfg(dataset))
    try:
        steps = job.ok().all_steps()
    finally:
        job.kill()
    assert [r["keys"] for r in steps] == _expected_keys(_cfg(dataset))
    assert [r["step"] for r in steps] == list(range(STEPS))
    return steps


def _same(run: list[dict[str, Any]], reference: list[dict[str, Any]], start: int = 0) -> None:
    assert [r["step"] for r in run] == list(range(start, start + len(run)))
    for r in run:
        ref = reference[r["step"]]
        assert r["keys"] == ref["keys"], f"step {r['step']}: other records"
        assert r["global"] == ref["global"], f"step {r['step']}: other global batch contents"
        assert r["params"] == ref["params"], f"step {r['step']}: other params"


@pytest.mark.parametrize("worker_count", WORKER_COUNTS)
def test_global_batches_identical_for_1_2_4_processes_and_one_epoch_exactly_once(
        dataset: str, reference: list[dict[str, Any]], jobs: list[Job], tmp_path: Any, worker_count: int) -> None:
    for n in (2, 4):
        job = Job(str(tmp_path), f"n{n}", n, _cfg(dataset, worker_count=worker_count, epoch_check=True))
        jobs.append(job)
        steps = job.ok().all_steps()
        assert len(steps) == STEPS
        _same(steps, reference)
        # each process's local part is its own slice of the global batch
        locals_ = {job.steps(i)[0]["local"] for i in range(n)}
        assert len(locals_) == n
        # one epoch with drop_remainder=False: every record exactly once across the processes
        seen = [k for i in range(n) for k in json.loads(job.file(f"epoch-{i}.json"))]
        assert sorted(seen) == list(range(NUM_RECORDS))


@pytest.mark.parametrize("worker_count", WORKER_COUNTS)
def test_orbax_save_sigkill_and_restore_on_2_4_and_1_processes(
        dataset: str, reference: list[dict[str, Any]], jobs: list[Job], tmp_path: Any, worker_count: int) -> None:
    ckpt = str(tmp_path / "ckpt")
    cfg = _cfg(dataset, worker_count=worker_count, ckpt_dir=ckpt)
    # 2 processes save at step 7 and are SIGKILLed while they go on
    first = Job(str(tmp_path), "save-n2", 2, dict(cfg, save_step=7, hold=True))
    jobs.append(first)
    first.wait_for_files("saved")
    first.kill()
    done = first.all_steps(killed=True)
    assert len(done) >= 7
    _same(done, reference)
    saved = sorted(os.listdir(os.path.join(ckpt, "7", "data")))
    assert [s for s in saved if s.endswith(".json")] == ["process_0-of-2.json", "process_1-of-2.json"]

    # the same number of processes, then 4 (2 -> 4, which saves again at step 13), then 1 (4 -> 1)
    for name, n, extra, start in (("same-n2", 2, {}, 7), ("n4", 4, {"save_step": 13}, 7),
                                  ("n1", 1, {}, 13)):
        job = Job(str(tmp_path), name, n, dict(cfg, restore_step=start, **extra))
        jobs.append(job)
        steps = job.ok().all_steps()
        assert steps[0]["restored"] == "exact"
        assert len(steps) == STEPS - start
        _same(steps, reference, start)


def test_restore_refused_where_not_exact_and_approximate_on_request(
        dataset: str, reference: list[dict[str, Any]], jobs: list[Job], tmp_path: Any) -> None:
    ckpt = str(tmp_path / "ckpt")
    cfg = _cfg(dataset, ckpt_dir=ckpt, steps=10)
    jobs.append(Job(str(tmp_path), "save", 2, dict(cfg, save_step=7)))
    jobs[-1].ok()
    # global position 7 * 16 = 112 is not a whole number of global batches of 24 (2 x 12)
    bigger = dict(cfg, global_batch=24, restore_step=7)
    job = Job(str(tmp_path), "refused", 2, bigger)
    jobs.append(job)
    assert job.wait() == [3, 3]
    for i in range(2):
        error = job.file(f"error-{i}.txt")
        assert error.startswith("GeometryError") and "whole number of new global batches" in error
        assert "allow_approximate" in error
    job = Job(str(tmp_path), "approximate", 2, dict(bigger, allow_approximate=True, steps=9))
    jobs.append(job)
    steps = job.ok().all_steps()
    assert steps[0]["restored"] == "approximate"
    # restarted at global position 96 = 4 global batches of 24: 16 records served again
    whole = [k for r in reference for k in r["keys"]]
    assert [k for r in steps for k in r["keys"]] == whole[96:96 + 24 * len(steps)]


def test_filter_before_batch_restores_on_other_process_count_exactly_once(
        dataset: str, jobs: list[Job], tmp_path: Any) -> None:
    from thresher.jax.state_files import state_filename

    ckpt = str(tmp_path / "ckpt")
    cfg = _cfg(dataset, ckpt_dir=ckpt, num_epochs=None, filter=True, steps=12)
    jobs.append(Job(str(tmp_path), "save", 2, dict(cfg, save_step=5)))
    jobs[-1].ok()
    job = Job(str(tmp_path), "merged", 4, dict(cfg, restore_step=5, steps=8))
    jobs.append(job)
    steps = job.ok().all_steps()
    assert steps[0]["restored"] == "exact-merged"
    # what the restarted job served is what 4 in-process shards restored from the merged states serve
    states = []
    for i in range(2):
        with open(os.path.join(ckpt, "5", "data", state_filename(i, 2))) as f:
            states.append(json.load(f))
    merged = th.merge_states(states)
    shards = [iter(build_loader(cfg, th.ShardOptions(i, 4, drop_remainder=True))) for i in range(4)]
    for it in shards:
        it.set_state(merged)
    for r in steps:
        assert r["keys"] == [k for it in shards for k in np.asarray(next(it)["key"]).tolist()]


@pytest.mark.parametrize("n", [2, 4])
def test_split_for_jax_process_gives_each_process_its_contiguous_part(
        dataset: str, jobs: list[Job], tmp_path: Any, n: int) -> None:
    records = 103
    path = str(tmp_path / "prepared")
    th.prepare(path, {"train": [{"n": i} for i in range(records)]},  # type: ignore[attr-defined]
               features={"n": th.features.Scalar("int64")}, shuffle=False, progress=False)  # type: ignore[attr-defined]
    job = Job(str(tmp_path), f"split-n{n}", n, _cfg(dataset, steps=0, split_path=path))
    jobs.append(job)
    job.ok()
    parts = [json.loads(job.file(f"split-{i}.json")) for i in range(n)]
    values = [v for p in parts for v in p["values"]]
    assert sorted(values) == list(range(records))  # every record exactly once across the processes
    for i, p in enumerate(parts):  # contiguous, in process order, sizes differing by at most one
        assert sorted(p["values"]) == list(range(min(p["values"]), max(p["values"]) + 1))
        assert len(p["values"]) in (records // n, records // n + 1)
    assert [min(p["values"]) for p in parts] == sorted(min(p["values"]) for p in parts)


@pytest.mark.parametrize("worker_count", WORKER_COUNTS)
@pytest.mark.parametrize("dies", [1, 0], ids=["process1-dies", "coordinator-dies"])
def test_a_dead_process_makes_the_others_fail_in_bounded_time(
        dataset: str, jobs: list[Job], tmp_path: Any, dies: int, worker_count: int) -> None:
    heartbeat = 4
    cfg = _cfg(dataset, num_epochs=None, steps=10**6, die_at_step=5, die_process=dies, heartbeat_s=heartbeat,
               worker_count=worker_count)
    job = Job(str(tmp_path), "die", 2, cfg)
    jobs.append(job)
    t0 = time.monotonic()
    codes = job.wait(timeout=heartbeat + 60)
    elapsed = time.monotonic() - t0
    assert codes[dies] == -signal.SIGKILL
    survivor = 1 - dies
    assert codes[survivor] != 0
    text = job.output(survivor)
    assert ("stopped sending heartbeats" in text or "Connection closed by peer" in text
            or "detected fatal errors" in text), text[-3000:]
    assert elapsed < heartbeat + 45
    # nothing is left behind: no loader worker process outlives its main process
    deadline = time.monotonic() + 15
    while job.alive_groups() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not job.alive_groups()
