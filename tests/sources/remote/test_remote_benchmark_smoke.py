"""Smoke tests of benchmarks/remote_read.py and chunk_hash.py on tiny files (the harnesses
run; not benchmarks)."""

from __future__ import annotations

from typing import Any

from benchmarks import chunk_hash, remote_read


def test_remote_read_benchmark_runs(tmp_path: Any) -> None:
    rows = remote_read.main(["--tiny", "--latency-ms", "5", "--cache", str(tmp_path)])
    assert {(r["workload"], r["where"], str(r["workers"])) for r in rows} == {
        (w, where, workers) for w in ("W1", "W3") for where in ("local", "s3", "s3 naive")
        for workers in ("0", "auto") if (where, workers) != ("s3 naive", "auto")}
    remote = [r for r in rows if r["where"] != "local"]
    assert all(r["rate"] > 0 and r["req_per_batch"] >= 1 for r in remote)
    # One chunk per record (group_size 1): every batch fetches about its chunks' bytes.
    assert all(0.8 <= r["bytes_ratio"] <= 1.5 for r in remote)


def test_chunk_hash_benchmark_runs(tmp_path: Any) -> None:
    out = chunk_hash.main(["--tiny", "--latency-ms", "5", "--cache", str(tmp_path)])
    assert {r["impl"] for r in out["speeds"]} >= {"c", "python", "numpy k=1024", "array_rec"}
    assert all(r["mb_s"] > 0 for r in out["speeds"])
    assert {(r["group"], r["where"]) for r in out["w1"]} == {(1, "s3"), (1, "s3 cache/4")}
    assert all(r["verified"] > 0 and r["unverified"] > 0 and 0 <= r["hash_share"] < 1 for r in out["w1"])
