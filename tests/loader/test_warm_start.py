"""Warm start: the first chunks in the main process while the fork server starts, then the pool.

Whatever chunk the hand-over happens at, the chunks (and so the batches) are those of one
producer; in a fresh interpreter, the real warm start gives the batches of worker_count=0.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.loader import worker_helpers as wh
from thresher.loader.producers.in_process import InProcessProducer
from thresher.loader.producers.warm_start import WarmStartProducer

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class _Deferred:
    """A stand-in for a deferred worker pool: ready after ``ready_after`` asks; computes in process."""

    def __init__(self, proc: Any, at: int, stop: int, chunk: int, ready_after: int) -> None:
        self.proc, self.stop, self.chunk = proc, stop, chunk
        self.created_at, self.begun_at = at, None
        self.asks, self.ready_after = 0, ready_after
        self.inner: InProcessProducer | None = None

    def workers_ready(self) -> bool:
        self.asks += 1
        return self.asks > self.ready_after

    def begin(self, start: int) -> None:
        assert self.begun_at is None
        self.begun_at = start
        self.inner = InProcessProducer(self.proc, start, self.stop, self.chunk)

    def next_chunk(self) -> Any:
        assert self.inner is not None, "chunks asked of a pool that has not begun"
        return self.inner.next_chunk()

    def close(self) -> None:
        pass


@given(n=st.integers(1, 300), chunk=st.integers(1, 64), start=st.integers(0, 40), server=st.integers(0, 12),
       workers=st.integers(0, 6), seed=st.integers(0, 2**32), filter_=st.booleans())
@settings(max_examples=60, deadline=None)
def test_any_handover_point_gives_the_chunks_of_one_producer(records_path: str, n: int, chunk: int, start: int,
                                                             server: int, workers: int, seed: int,
                                                             filter_: bool) -> None:
    loader = wh.build(records_path, n=min(n, wh.N_RECORDS), shuffle=True, seed=seed, random_map=True,
                      filter=filter_, batch=None)
    proc = loader._processor
    stop = min(n, wh.N_RECORDS)
    start = min(start, stop)
    pools: list[_Deferred] = []
    asked = [0]

    def ready() -> bool:  # the fork server
        asked[0] += 1
        return asked[0] > server

    def pool(at: int) -> _Deferred:
        pools.append(_Deferred(proc, at, stop, chunk, workers))
        return pools[-1]

    warm = WarmStartProducer(proc, start, stop, chunk, None, pool, ready=ready)
    plain = InProcessProducer(proc, start, stop, chunk)
    count = 0
    while True:
        a, b = warm.next_chunk(), plain.next_chunk()
        if a is None or b is None:
            assert a is None and b is None
            break
        count += 1
        assert (a.start, a.stop) == (b.start, b.stop)
        assert a.positions.tolist() == b.positions.tolist()
        assert len(a.elements) == len(b.elements)
        for x, y in zip(a.elements, b.elements):
            wh.assert_same(x, y)
    assert len(pools) <= 1
    if pools and pools[0].begun_at is not None:
        begun = pools[0].begun_at
        assert (begun - start) % chunk == 0 and start + chunk <= begun < stop  # a boundary, after 1+ local chunks
        assert warm.local_chunks == (begun - start) // chunk  # every chunk before it computed here, none twice
    else:
        assert warm.local_chunks == count  # no hand-over: every chunk here


_FRESH = textwrap.dedent("""
    import json, multiprocessing, sys
    import numpy as np
    from tests.loader import worker_helpers as wh
    from thresher.loader import warm_start
    if __name__ == "__main__":
        loader = wh.build(sys.argv[1], shuffle=True, seed=7, random_map=True, num_epochs=None, batch=8,
                          chunk_size=16, workers=2, warm_start=True)
        it = iter(loader)
        got, handed = [], None
        for i in range(100_000):
            got.append(next(it))
            workers = [p for p in multiprocessing.active_children() if p.name.startswith("thresher-worker")]
            if workers and handed is None:
                handed = i
            if handed is not None and i >= handed + 20:
                break
        it.close()
        ref = iter(wh.build(sys.argv[1], shuffle=True, seed=7, random_map=True, num_epochs=None, batch=8,
                            chunk_size=16, workers=0))
        same = True
        for b in got:
            try:
                wh.assert_same(b, next(ref))
            except AssertionError:
                same = False
        print(json.dumps({"batches": len(got), "handed_over_after": handed, "same": same}))
""")


def test_fresh_process_warm_start_then_workers_same_batches(records_path: str) -> None:
    env = dict(os.environ, PYTHONPATH=ROOT)
    out = subprocess.run([sys.executable, "-c", _FRESH, records_path], env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert res["handed_over_after"] is not None, res  # the workers took over
    assert res["same"], res
    assert np.int64(res["batches"]) > res["handed_over_after"]


def _slow(x: int) -> int:
    time.sleep(0.05)
    return x * 3


class _ReadyLater(_Deferred):
    """A stand-in pool whose workers are ready ``after_s`` seconds after it is made."""

    def __init__(self, proc: Any, at: int, stop: int, chunk: int, after_s: float) -> None:
        super().__init__(proc, at, stop, chunk, ready_after=0)
        self.ready_at = time.monotonic() + after_s

    def workers_ready(self) -> bool:
        return time.monotonic() >= self.ready_at


def test_heavy_chunks_hand_over_while_this_process_computes() -> None:
    """A heavy first chunk starts the fork server (and the pool) while it is computed, and the
    workers take the stream from the chunk after the one in progress as soon as they are ready,
    not at the next chunk boundary; never during the first chunk, which they would slow."""
    import thresher as th
    from thresher.loader.chunk import ChunkProcessor
    from thresher.transforms import plan_operations

    stop, chunk = 40, 4  # chunks of at least 0.2 s
    proc = ChunkProcessor(th.sources.RangeDataSource(0, stop), th.IndexSampler(stop, shuffle=True, seed=3),
                          plan_operations([_slow]))
    local_done = [0]
    events: list[tuple[str, int]] = []
    pools: list[_ReadyLater] = []

    def ready() -> bool:
        events.append(("server asked", local_done[0]))
        return True

    def pool(at: int) -> _ReadyLater:
        events.append(("pool made", local_done[0]))
        pools.append(_ReadyLater(proc, at, stop, chunk, after_s=0.3))  # ready during the second chunk
        return pools[-1]

    warm = WarmStartProducer(proc, 0, stop, chunk, None, pool, ready=ready, timeout_s=60.0)
    plain = InProcessProducer(proc, 0, stop, chunk)
    while (a := warm.next_chunk()) is not None:
        b = plain.next_chunk()
        assert b is not None and a.positions.tolist() == b.positions.tolist() and a.elements == b.elements
        local_done[0] = warm.local_chunks
    assert plain.next_chunk() is None
    assert events[0] == ("server asked", 0) and ("pool made", 0) in events  # during the first chunk
    # Ready during the second chunk: the workers take every chunk after it, from the third.
    assert pools[0].begun_at == 2 * chunk and warm.local_chunks == 2
