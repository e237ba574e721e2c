"""worker_count and worker_mode change nothing but speed: same batches, same states, exact resume
across W and across processes and threads."""

from __future__ import annotations

import json
import mmap
import multiprocessing
import os
import subprocess
import sys
import textwrap
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

import thresher as th
from tests.loader import worker_helpers as wh
from tests.loader.leaks import leak_check

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

configs = st.fixed_dictionaries({
    "n": st.integers(1, wh.N_RECORDS),
    "shuffle": st.booleans(),
    "seed": st.integers(0, 2**64 - 1),
    "num_epochs": st.sampled_from([1, 2]),
    "shards": st.integers(1, 3).flatmap(lambda p: st.tuples(st.integers(0, p - 1), st.just(p))),
    "shard_drop": st.booleans(),
    "batch": st.one_of(st.none(), st.integers(1, 12)),
    "drop_remainder": st.booleans(),
    "filter": st.booleans(),
    "random_map": st.booleans(),
    "batch_op": st.booleans(),
    "chunk_size": st.one_of(st.none(), st.integers(1, 40)),
    "buffer": st.integers(1, 3),
    "threads": st.sampled_from([0, 1, 4]),
    "prefetch": st.sampled_from([0, 100, 500]),
})


modes = st.sampled_from(["process", "thread"])


def _clean(cfg: dict[str, Any]) -> dict[str, Any]:
    cfg = dict(cfg)
    if cfg["batch"] is None:
        cfg["batch_op"] = False
    return cfg


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cfg=configs)
def test_every_worker_count_gives_the_same_batches_and_states(records_path: str, _helpers_started: None,
                                                               cfg: dict[str, Any]) -> None:
    cfg = _clean(cfg)
    threads = cfg.pop("threads")
    with leak_check():
        ref, ref_states = wh.run(wh.build(records_path, **cfg, workers=0, threads=0))
        # every worker count and mode, with this example's reads in flight
        for w, mode in [(0, "process"), *((w, m) for w in (1, 2, 3) for m in ("process", "thread"))]:
            got, states = wh.run(wh.build(records_path, **cfg, workers=w, threads=threads, mode=mode))
            wh.assert_all_same(ref, got, f"worker_count={w}, worker_mode={mode}, num_threads={threads}")
            assert states == ref_states, f"worker_count={w}, worker_mode={mode}, num_threads={threads}"
            del got


@pytest.mark.parametrize("mode", ["process", "thread"])
def test_an_endless_stream_gives_the_same_batches(records_path: str, no_leaks: None, mode: str) -> None:
    cfg = dict(n=50, shuffle=True, seed=5, num_epochs=None, batch=16, random_map=True)
    ref, ref_states = wh.run(wh.build(records_path, **cfg), limit=20)
    got, states = wh.run(wh.build(records_path, **cfg, workers=2, mode=mode), limit=20)
    wh.assert_all_same(ref, got)
    assert states == ref_states


def _mapped(a: np.ndarray) -> bool:
    base: Any = a
    while isinstance(base, np.ndarray):
        base = base.base
    return isinstance(base, memoryview) and isinstance(base.obj, mmap.mmap)


def test_worker_stacked_batches_reach_the_loop_without_a_copy(records_path: str, no_leaks: None) -> None:
    loader = wh.build(records_path, batch=16, random_map=True, workers=2)
    batches, _ = wh.run(loader)
    assert all(_mapped(b["image"]) for b in batches)  # views onto the worker's shared memory
    assert all(b["image"].flags.writeable for b in batches)
    del batches  # the mappings go with the arrays (checked by no_leaks)


def test_elements_travel_through_shared_memory_when_a_filter_comes_first(records_path: str,
                                                                        no_leaks: None) -> None:
    loader = wh.build(records_path, batch=None, filter=True, workers=2)
    elements, _ = wh.run(loader)
    assert len(elements) == sum(1 for i in range(wh.N_RECORDS) if i % 3)
    assert all(_mapped(e["image"]) for e in elements)


_CHILD = textwrap.dedent("""
    import json, pickle, sys
    from tests.loader import worker_helpers as wh
    cfg, state, workers, mode, out = json.loads(sys.argv[1])
    it = iter(wh.build(**cfg, workers=workers, mode=mode))
    it.set_state(state)
    batches = list(it)
    with open(out, "wb") as f:
        pickle.dump((batches, it.get_state()), f)
""")


def _restore_in_fresh_process(cfg: dict[str, Any], state: dict[str, Any], workers: int, out: str,
                              mode: str = "process") -> Any:
    import pickle

    env = dict(os.environ, PYTHONPATH=ROOT)
    arg = json.dumps([cfg, state, workers, mode, out])
    proc = subprocess.run([sys.executable, "-c", _CHILD, arg], env=env, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    with open(out, "rb") as f:
        return pickle.load(f)


_FILTERED = dict(n=150, shuffle=True, seed=7, num_epochs=2, shards=(1, 2), shard_drop=False, batch=8,
                 drop_remainder=False, filter=True, random_map=True, batch_op=True, chunk_size=None, buffer=2)


# Each example starts a Python process: no shrinking (a failure prints its example anyway).
@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture],
          phases=[Phase.explicit, Phase.reuse, Phase.generate])
@given(cfg=configs, wa=st.integers(0, 3), wb=st.integers(0, 3), where=st.floats(0, 1), ma=modes, mb=modes)
@example(cfg=_FILTERED, wa=2, wb=3, where=0.4, ma="thread", mb="process")
@example(cfg={**_FILTERED, "filter": False, "drop_remainder": True}, wa=3, wb=1, where=0.7, ma="process",
         mb="thread")
def test_a_state_saved_with_any_worker_count_restores_with_any_other_in_a_new_process(
        records_path: str, tmp_path: Any, _helpers_started: None, cfg: dict[str, Any], wa: int, wb: int,
        where: float, ma: str, mb: str) -> None:
    cfg = _clean(cfg)
    cfg["paths"] = records_path
    with leak_check(timeout=5.0):
        ref, ref_states = wh.run(wh.build(**cfg, workers=0))
        k = int(where * len(ref))
        state = wh.checkpoint(wh.build(**cfg, workers=wa, mode=ma), k)
        json.dumps(state)  # a checkpoint is JSON
        batches, end_state = _restore_in_fresh_process(cfg, state, wb, str(tmp_path / f"out-{wa}-{wb}.pkl"), mb)
        wh.assert_all_same(ref[k:], batches)
        assert end_state == (ref_states[-1] if ref_states else state)


def test_worker_buffer_size_is_checked(records_path: str) -> None:
    with pytest.raises(th.errors.ConfigError, match="worker_buffer_size"):
        wh.build(records_path, workers=2, buffer=0)


def _mapped_bytes() -> list[int]:
    sizes = []
    with open("/proc/self/maps") as f:
        for line in f:
            if "thresher-result" in line:
                lo, hi = line.split()[0].split("-")
                sizes.append(int(hi, 16) - int(lo, 16))
    return sizes


def test_keeping_one_leaf_of_a_batch_keeps_only_that_leafs_memory(records_path: str, no_leaks: None) -> None:
    loader = wh.build(records_path, batch=16, workers=2)
    kept = [batch["image"][:, 0] for batch in loader]  # a view: keeps its leaf's mapping alive
    assert len(kept) == len(_mapped_bytes()) == 13
    assert max(_mapped_bytes()) <= 16 * wh.SIDE * wh.SIDE * 4 + 4096
    del kept


def test_empty_streams_and_a_state_at_the_end_start_no_worker(records_path: str, no_leaks: None) -> None:
    assert wh.run(wh.build(records_path, n=0, workers=2))[0] == []
    loader = wh.build(records_path, batch=8, workers=3)
    _, states = wh.run(loader)
    with iter(loader) as it:
        it.set_state(states[-1])
        assert list(it) == []
        assert it._producer is None and not [p for p in multiprocessing.active_children()
                                             if p.name.startswith("thresher-worker-")]
