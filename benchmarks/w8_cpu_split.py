"""W8 with 2 workers: where the CPU goes, the main process apart from its workers.

    python -m benchmarks.w8_cpu_split thresher_loader '{"workers": 2}'
    python -m benchmarks.w8_cpu_split torch_loader '{"workers": 2}'

One epoch of W8 (3,072 JPEGs, 12 batches of 256) in this process, which has imported jax
and torch. After the first batch it reports images/s and CPU milliseconds per image in the
main process and in its children (the workers; thresher's fork server does nothing then).
Run the two loaders alternately, several times: the machine is noisy.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import time
from typing import Any

from benchmarks.child import _tree_cpu


def run(module: str, cfg: dict[str, Any]) -> None:
    from benchmarks import datasets

    m = importlib.import_module(f"benchmarks.loaders.{module}")
    getattr(m, "import_now", lambda: None)()
    data = datasets.ensure("benchmarks/results/data", "jpeg", 3072)
    factory, count = m.pipeline("W8", cfg, data)
    me = os.getpid()
    seen: dict[int, float] = {}  # pid -> its CPU seconds when last seen (workers exit at the end)
    base: dict[int, float] = {}
    n, first_n = 0, 0
    t1 = 0.0
    it = factory()
    for b in it:
        n += count(b)
        if not first_n:  # the clocks start at the first batch
            first_n, t1 = n, time.perf_counter()
            base = _tree_cpu()
        seen.update(_tree_cpu())
    t2 = time.perf_counter()
    main = seen[me] - base[me]
    children = sum(c - base.get(pid, 0.0) for pid, c in seen.items() if pid != me)
    after = n - first_n
    print(f"{module} {cfg}: {after / (t2 - t1):,.0f} images/s after the first batch; CPU per image: main "
          f"{main / after * 1e3:.3f} ms, children {children / after * 1e3:.3f} ms", flush=True)
    getattr(it, "close", lambda: None)()


if __name__ == "__main__":
    import jax  # noqa: F401  (as a training script has: the same processes as benchmarks.epoch_time)
    import torch  # noqa: F401

    run(sys.argv[1], json.loads(sys.argv[2]))
