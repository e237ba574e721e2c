"""Smoke test of the block-shuffle benchmarks on tiny data (not a benchmark: the figures are not checked)."""

from __future__ import annotations

import json
import os

from benchmarks import block_shuffle_throughput, shuffle_quality


def test_shuffle_quality_runs_and_plots(tmp_path: str, capsys) -> None:  # type: ignore[no-untyped-def]
    out = str(tmp_path)
    assert shuffle_quality.main(["--records", "6000", "--steps", "20", "--seeds", "1", "--out", out,
                                 "--only", "none,full,block 512x128 (default)"]) == 0
    with open(os.path.join(out, "shuffle_quality.json")) as f:
        medians = json.load(f)["medians"]
    assert set(medians) == {"none", "full", "block 512x128 (default)"}
    assert medians["none"]["tv"] > medians["full"]["tv"]  # a class-sorted stream is as bad as it gets
    assert os.path.getsize(os.path.join(out, "shuffle_quality.png")) > 10_000
    assert "TV/full" in capsys.readouterr().out


def test_throughput_runs_every_variant(tmp_path: str, capsys) -> None:  # type: ignore[no-untyped-def]
    assert block_shuffle_throughput.main(["--records", "3000", "--record-bytes", "100", "--batches", "3",
                                          "--repeats", "1", "--latency-ms", "0", "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert "remote g4096 block" in printed and "local g65536 block" in printed


def test_the_readers_benchmark_runs_and_says_what_auto_picks(tmp_path: str, capsys) -> None:  # type: ignore[no-untyped-def]
    from benchmarks import array_record_readers

    assert array_record_readers.main(["--records", "3000", "--record-bytes", "50", "--groups", "1,2048",
                                      "--seconds", "0.2", "--repeats", "1", "--dir", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    picks = {line.split()[0]: line.split()[-1] for line in lines if line.split() and line.split()[0].isdigit()}
    assert picks == {"1": "native", "2048": "ranges"}
