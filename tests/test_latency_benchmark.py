"""benchmarks/latency.py (W7) runs end to end on tiny sizes, with Grain and PyTorch rows."""

from __future__ import annotations

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_w7_runs_and_reports_ratios() -> None:
    rows = "thresher auto,thresher w=0 threads=64,grain w=0 threads=16,torch w=0"
    proc = subprocess.run([sys.executable, "-m", "benchmarks.latency", "--latencies", "1", "--repeats", "1",
                           "--records", "640", "--cap-s", "5", "--rows", rows], cwd=ROOT, capture_output=True,
                          text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    for row in rows.split(","):
        assert row in out, out
    assert "Grain's best" in out and "auto chose: autotune: worker_count=" in out and "failed" not in proc.stderr
