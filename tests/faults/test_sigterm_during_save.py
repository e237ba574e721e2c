"""SIGTERM of the training process while Orbax saves a checkpoint (model and iterator): the
last committed checkpoint restores exactly, parameters and data, and the half-written one is
never taken for a checkpoint."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import orbax.checkpoint  # noqa: E402,F401  (the test extra has it: a missing one fails)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SIZE = 4_000_000  # float32 parameters: 16 MB, so that a save takes a while

COMMON = f"""
import numpy as np
import thresher as th

SIZE = {SIZE}

def make_loader(workers):
    sampler = th.IndexSampler(10_000, shuffle=True, seed=4, num_epochs=None)
    return th.DataLoader(th.sources.RangeDataSource(0, 10_000), sampler,
                         [lambda x: np.int64(x), th.Batch(16)], worker_count=workers)

def initial_params():
    return {{"w": np.random.default_rng(0).standard_normal(SIZE).astype(np.float32)}}

def train_step(params, batch):
    return {{"w": params["w"] + np.float32(batch.sum() % 7)}}
"""

TRAINER = COMMON + """
import sys, time
import orbax.checkpoint as ocp
import thresher.jax

if __name__ == "__main__":
    mngr = ocp.CheckpointManager(sys.argv[1])
    params = initial_params()
    it = iter(make_loader(2))
    for step in range(1, 1_000_000):
        params = train_step(params, next(it))
        if step in (5, 10):
            print(f"saving {step}", flush=True)
            mngr.save(step, args=ocp.args.Composite(params=ocp.args.StandardSave(params),
                                                    data=thresher.jax.CheckpointSave(it)))
            if step == 5:
                mngr.wait_until_finished()
                print("committed 5", flush=True)
        if step > 10:
            time.sleep(0.01)  # keep training until the signal comes
"""


def _reference(steps: int, then: int) -> tuple[np.ndarray, list[list[int]]]:
    namespace: dict = {}
    exec(COMMON, namespace)
    params, it = namespace["initial_params"](), iter(namespace["make_loader"](0))
    for _ in range(steps):
        params = namespace["train_step"](params, next(it))
    return params["w"], [next(it).tolist() for _ in range(then)]


@pytest.mark.parametrize("delay", [0.0, 0.05, 0.3])
def test_sigterm_during_an_orbax_save(tmp_path, delay: float) -> None:
    import orbax.checkpoint as ocp

    import thresher.jax

    (tmp_path / "train.py").write_text(TRAINER)
    ckpt = str(tmp_path / "ckpt")
    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=REPO)
    proc = subprocess.Popen([sys.executable, "train.py", ckpt], cwd=str(tmp_path), env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        lines = []
        while not lines or lines[-1] != "saving 10":
            line = proc.stdout.readline()
            assert line, f"the trainer ended early: {proc.stderr.read()[-3000:]}"
            lines.append(line.strip())
        time.sleep(delay)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "committed 5" in lines
    assert proc.returncode != 0  # it was stopped mid-run, not finished

    namespace: dict = {}
    exec(COMMON, namespace)
    with ocp.CheckpointManager(ckpt) as mngr:
        step = mngr.latest_step()
        assert step in (5, 10), mngr.all_steps()
        assert set(mngr.all_steps()) <= {5, 10}
        fresh = iter(namespace["make_loader"](0))
        abstract = {"w": np.zeros(SIZE, np.float32)}
        out = mngr.restore(step, args=ocp.args.Composite(params=ocp.args.StandardRestore(abstract),
                                                         data=thresher.jax.CheckpointRestore(fresh)))
    want_params, want_batches = _reference(step, 3)
    assert np.array_equal(np.asarray(out["params"]["w"]), want_params)
    assert [next(fresh).tolist() for _ in range(3)] == want_batches
