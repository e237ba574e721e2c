"""Smoke test of benchmarks/remote_read.py on tiny files (the harness runs; not a benchmark)."""

from __future__ import annotations

from typing import Any

from benchmarks import remote_read


def test_remote_read_benchmark_runs(tmp_path: Any) -> None:
    rows = remote_read.main(["--tiny", "--latency-ms", "5", "--cache", str(tmp_path)])
    assert {(r["workload"], r["where"], str(r["workers"])) for r in rows} == {
        (w, where, workers) for w in ("W1", "W3") for where in ("local", "s3", "s3 naive")
        for workers in ("0", "auto") if (where, workers) != ("s3 naive", "auto")}
    remote = [r for r in rows if r["where"] != "local"]
    assert all(r["rate"] > 0 and r["req_per_batch"] >= 1 for r in remote)
    # One chunk per record (group_size 1): every batch fetches about its chunks' bytes.
    assert all(0.8 <= r["bytes_ratio"] <= 1.5 for r in remote)
