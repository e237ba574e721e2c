"""Smoke test of the benchmark harness on tiny data (a few seconds; not a benchmark).

Grain and PyTorch are optional at test time: their parts are skipped when the
package cannot be imported.
"""

from __future__ import annotations

import importlib
import json
import os

import pytest

from benchmarks import cases, child, datasets, report, run
from benchmarks.runner import left_behind, run_case, shm_left, shm_names

MODULES = {"thresher": "thresher_loader", "bare": "bare_loader", "grain": "grain_loader", "torch": "torch_loader"}


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    cache = str(tmp_path_factory.mktemp("bench-data"))
    out = {"W1": datasets.ensure(cache, "mnist", 300), "W3": datasets.ensure(cache, "images", 130),
           "W6": datasets.ensure(cache, "tokens", 200), "W2": {"num_records": 1000},
           "W2S": {"num_records": 1000}, "W8": datasets.ensure(cache, "jpeg", 260)}
    again = datasets.ensure(cache, "mnist", 300)  # cached: same description, not rewritten
    assert again == out["W1"]
    return out


def _module(family: str):  # type: ignore[no-untyped-def]
    return importlib.import_module(f"benchmarks.loaders.{MODULES[family]}")


@pytest.mark.parametrize("family", ["thresher", "bare", "grain", "torch"])
@pytest.mark.parametrize("workload", ["W1", "W2", "W2S", "W3", "W6", "W8"])
def test_pipelines_deliver_the_same_batches_shapes(family: str, workload: str, data: dict) -> None:
    module = _module(family)
    factory, count = module.pipeline(workload, {}, data[workload])
    res = child.measure_throughput(factory, count, limit_records=None, time_cap_s=None)
    n = data[workload]["num_records"]
    batch = {"W1": 128, "W3": 64, "W6": 64, "W2": 256, "W2S": 256, "W8": 256}[workload]
    expected = n if workload in ("W2", "W2S") else n // batch * batch
    assert res["exhausted"] and res["records"] == expected, res
    first = res["first_batch"]
    if workload == "W1":
        assert first["image"][0] == [128, 28, 28] and first["image"][1] == "float32", first
    elif workload == "W3":
        assert first[0] == [64, 112, 112, 3], first
    elif workload == "W6":
        assert first[0] == [64, 512] and first[1] == "int32", first
    elif workload == "W8":
        assert first[0] == [256, 224, 224, 3] and first[1] == "uint8", first


def test_thresher_w6_variants_and_packing_marked_unavailable(data: dict) -> None:
    from benchmarks.loaders import Unavailable, thresher_loader

    for variant in ("pad_map", "pad_batch"):
        factory, count = thresher_loader.pipeline("W6", {"variant": variant}, data["W6"])
        batches = list(factory())
        assert all(b.shape == (64, 512) for b in batches)
    a = list(thresher_loader.pipeline("W6", {"variant": "pad_map"}, data["W6"])[0]())
    b = list(thresher_loader.pipeline("W6", {"variant": "pad_batch"}, data["W6"])[0]())
    assert all((x == y).all() for x, y in zip(a, b))  # the two padding strategies agree exactly
    if not hasattr(__import__("thresher"), "Dataset"):
        with pytest.raises(Unavailable):
            thresher_loader.pipeline("W6", {"variant": "pack"}, data["W6"])[0]()


@pytest.mark.parametrize("family", ["thresher", "grain", "torch"])
def test_restore_and_sampler(family: str, data: dict) -> None:
    module = _module(family)
    res = module.restore({"position": 128, "replay_cap": 128}, data["W1"])
    assert res["records"] == 128 and res["restore_s"] > 0
    res = module.sampler_first_indices({"num_records": 10**9, "measure_at": 10**4})
    assert res["first_1000_s"] > 0


def test_run_case_in_a_subprocess_and_unavailable_workers(data: dict) -> None:
    spec = {"workload": "W1", "module": "thresher_loader", "kind": "throughput", "config": {"workers": 0},
            "data": data["W1"], "limit_records": None, "time_cap_s": None}
    res = run_case(spec, timeout_s=60)
    assert res["status"] == "ok", res
    assert res["records"] == 256 and res["peak_rss_total_mib"] > 0
    assert res["leftover_processes"] == 0
    res = run_case(dict(spec, config={"workers": 2}), timeout_s=60)
    assert res["status"] == "ok", res
    assert res["leftover_processes"] == 0  # the fork server exits on its own, after the run
    assert res["leftover_shm"] == []


def test_a_dev_shm_entry_left_by_the_run_is_a_leak_and_fails_the_command() -> None:
    before = shm_names()
    mine = f"/dev/shm/thresher-bench-test-{os.getpid()}"
    other = "/dev/shm/psm_bench_test_other_user_7"
    try:
        for path in (mine, other):
            with open(path, "w") as f:
                f.write("x")
        left = shm_left(before, {os.getpid()})
        assert left == [os.path.basename(mine)]  # named for thresher (and carrying a pid of the run)
        assert shm_left(before, {1}) == [os.path.basename(mine)]
    finally:
        for path in (mine, other):
            os.unlink(path)
    clean = {"workload": "W1", "name": "a", "leftover_processes": 0, "leftover_shm": []}
    leaky = {"workload": "W1", "name": "b", "leftover_processes": 1, "leftover_shm": ["torch_12_3"]}
    assert report.leaks([clean]) == []
    assert report.leaks([clean, leaky]) == ["W1 b: left: 1 proc, 1 shm ['torch_12_3']"]
    assert "LEAK left: 1 proc, 1 shm" in report._status(dict(leaky, status="ok"))


def test_left_behind_counts_what_outlives_the_settling_time() -> None:
    import subprocess
    import sys

    import psutil

    quick = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.3)"])
    stuck = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        left = left_behind([psutil.Process(quick.pid), psutil.Process(stuck.pid)], settle_s=2.0)
        assert [p.pid for p in left] == [stuck.pid]
    finally:
        stuck.kill()
        stuck.wait()
        quick.wait()


def test_end_to_end_tiny_run_writes_table_json_and_chart(tmp_path: "os.PathLike[str]") -> None:
    out = str(tmp_path)
    rc = run.main(["--tiny", "--only", "W2,W5", "--loaders", "thresher,bare", "--out", out])
    assert rc == 0
    with open(os.path.join(out, "results_tiny.json")) as f:
        results = json.load(f)
    rows = {r["name"]: r for r in results["rows"]}
    assert rows["thresher"]["status"] == "ok" and rows["thresher"]["records"] == cases.TINY["W2"]
    assert any(r["peer"].startswith("bare") and r["ratio"] for r in results["ratios"])
    text = report.render(results)
    assert "W5" in text and "Ratios" in text
    assert os.path.getsize(os.path.join(out, "results_tiny.png")) > 1000


def test_many_shards_benchmark_runs_tiny(tmp_path: "os.PathLike[str]", capsys: pytest.CaptureFixture[str]) -> None:
    from benchmarks import many_shards
    from thresher.sources.formats import shard_files

    many_shards.main(["--files", "12", "--records", "5", "--keys", "60", "--batch", "16", "--repeats", "1",
                      "--dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert "TFRecord, maps kept: 256" in out and "ArrayRecord, max_open=256" in out
    assert shard_files.MAX_MAPS_KEPT == 4096  # the benchmark puts the cap back
