"""A loader over Parquet files that a fresh process can rebuild from a JSON spec."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import thresher as th
from tests.helpers import REPO, digest


def write_corpus(d: str, files: int = 3, rows: int = 50, group: int = 7) -> list[str]:
    """``files`` Parquet files of ``rows`` rows each, row groups of ``group`` rows."""
    paths = []
    for f in range(files):
        ids = np.arange(f * rows, (f + 1) * rows)
        t = pa.table({"id": ids, "text": [f"text {k} " * (k % 4) for k in ids.tolist()],
                      "vec": [np.full(k % 3, k, np.float32) for k in ids.tolist()]})
        p = os.path.join(d, f"train-{f:05d}-of-{files:05d}.parquet")
        pq.write_table(t, p, row_group_size=group)
        paths.append(p)
    return paths


def features(r: dict[str, Any]) -> dict[str, Any]:
    return {"id": r["id"], "n": np.int64(len(r["text"])), "s": np.float32(r["vec"].sum())}


def jitter(r: dict[str, Any], rng: np.random.Generator) -> dict[str, Any]:
    return {**r, "j": rng.integers(0, 1000)}


def build(spec: dict[str, Any]) -> th.DataLoader:
    src = th.sources.ParquetSource(spec["paths"], cache_bytes=spec.get("cache_bytes", 1 << 20))
    sampler = th.IndexSampler(len(src), shuffle=True, seed=spec["seed"], num_epochs=2)
    ops = [th.MapTransform(features), th.RandomMapTransform(jitter), th.Batch(spec["batch"])]
    return th.DataLoader(src, sampler, ops, worker_count=spec["workers"], worker_mode=spec.get("mode"))


def run_fresh(spec: dict[str, Any], state: dict[str, Any] | None, limit: int) -> list[str]:
    """Restores ``state`` in a new Python process; the digests of the next ``limit`` batches."""
    code = ("import json, sys\n"
            "from tests.helpers import digest\n"
            "from tests.sources.formats.parquet.pipeline import build\n"
            "a = json.loads(sys.stdin.read())\n"
            "it = iter(build(a['spec']))\n"
            "if a['state'] is not None: it.set_state(a['state'])\n"
            "out = [digest(b) for b, _ in zip(it, range(a['limit']))]\n"
            "it.close()\n"
            "print(json.dumps(out))\n")
    proc = subprocess.run([sys.executable, "-c", code], input=json.dumps({"spec": spec, "state": state, "limit": limit}),
                          capture_output=True, text=True, cwd=REPO, timeout=180,
                          env={**os.environ, "PYTHONPATH": REPO})
    if proc.returncode != 0:
        raise AssertionError(f"fresh process failed:\n{proc.stderr}")
    return list(json.loads(proc.stdout.strip().splitlines()[-1]))


def digests(loader: th.DataLoader, limit: int | None = None) -> list[str]:
    it = iter(loader)
    out = [digest(b) for b in it] if limit is None else [digest(b) for b, _ in zip(it, range(limit))]
    it.close()
    return out
