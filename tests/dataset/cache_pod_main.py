"""One process of a jax.distributed job that builds one on-disk cache with its peers.

Run by ``tests/dataset/test_cache_pod.py``: ``python -m tests.dataset.cache_pod_main ID CONFIG``.
Every call of the map before the cache appends the element to ``calls-ID.txt``; the
elements read back through the cache go to ``out-ID.json``.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import numpy as np


def main(argv: list[str]) -> int:
    process_id = int(argv[0])
    cfg: dict[str, Any] = json.loads(argv[1])
    import jax

    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(coordinator_address=f"127.0.0.1:{cfg['port']}",
                               num_processes=cfg["num_processes"], process_id=process_id,
                               initialization_timeout=60)
    import thresher as th

    out = cfg["out"]

    def expensive(i: int) -> dict[str, Any]:
        with open(os.path.join(out, f"calls-{process_id}-{os.getpid()}.txt"), "a") as calls:
            calls.write(f"{i}\n")
        return {"x": np.full(2, i, dtype=np.int64), "name": f"e{i}"}

    def odd(e: dict[str, Any]) -> bool:
        return int(e["x"][0]) % 3 != 0

    ds = th.Dataset.range(cfg["n"]).map(expensive)
    if cfg["filter"]:
        ds = ds.filter(odd)
    if cfg["batch"]:
        ds = ds.batch(cfg["batch"])
    ds = ds.cache(cfg["path"], timeout_s=120)
    got = [[int(v) for v in np.asarray(e["x"]).ravel()] for e in ds.prefetch(worker_count=cfg["workers"])]
    with open(os.path.join(cfg["out"], f"out-{process_id}.json"), "w") as f:
        json.dump(got, f)
    jax.distributed.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
