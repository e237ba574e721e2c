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

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.loader import worker_helpers as wh
from thresher.loader.producer import InProcessProducer
from thresher.loader.warm_start import WarmStartProducer

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@given(n=st.integers(1, 300), chunk=st.integers(1, 64), start=st.integers(0, 40), handover=st.integers(0, 12),
       seed=st.integers(0, 2**32), filter_=st.booleans())
@settings(max_examples=60, deadline=None)
def test_any_handover_point_gives_the_chunks_of_one_producer(records_path: str, n: int, chunk: int, start: int,
                                                             handover: int, seed: int, filter_: bool) -> None:
    loader = wh.build(records_path, n=min(n, wh.N_RECORDS), shuffle=True, seed=seed, random_map=True,
                      filter=filter_, batch=None)
    proc = loader._processor
    stop = min(n, wh.N_RECORDS)
    start = min(start, stop)
    calls: list[int] = []
    asked = [0]

    def ready() -> bool:
        asked[0] += 1
        return asked[0] > handover

    def pool(at: int) -> InProcessProducer:
        calls.append(at)
        return InProcessProducer(proc, at, stop, chunk)

    warm = WarmStartProducer(proc, start, stop, chunk, None, pool, ready=ready)
    plain = InProcessProducer(proc, start, stop, chunk)
    while True:
        a, b = warm.next_chunk(), plain.next_chunk()
        if a is None or b is None:
            assert a is None and b is None
            break
        assert (a.start, a.stop) == (b.start, b.stop)
        assert a.positions.tolist() == b.positions.tolist()
        assert len(a.elements) == len(b.elements)
        for x, y in zip(a.elements, b.elements):
            wh.assert_same(x, y)
    assert len(calls) <= 1 and all((at - start) % chunk == 0 for at in calls)


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
