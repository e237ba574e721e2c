"""One benchmark run in a fresh process: ``python -m benchmarks.child SPEC.json``.

SPEC is a JSON file with ``workload``, ``module`` (a module of benchmarks.loaders),
``config``, ``data`` (a dataset description), ``limit_records``, ``time_cap_s`` and
``result_path``. The result (a JSON dict) is written to ``result_path``; its
``status`` is "ok", "unavailable" (the loader/config does not exist) or "error".
Only the loader family under test is imported, so runs do not share imports or caches.
"""

from __future__ import annotations

import gc
import importlib
import json
import os
import resource
import sys
import time
import traceback
from typing import Any, Callable, Iterator

_T_START = time.perf_counter()


def _hwm_mib() -> float:
    """This process's peak RSS since exec (VmHWM). ``getrusage``'s ru_maxrss is not used: it
    survives exec, so a child would report the harness's own RSS at the time it forked."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


def _rss_mib() -> float:
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * resource.getpagesize() / 2**20


def _describe(batch: Any) -> Any:
    if isinstance(batch, dict):
        return {k: _describe(v) for k, v in batch.items()}
    shape = getattr(batch, "shape", None)
    dtype = str(getattr(batch, "dtype", "")).replace("torch.", "")
    return [list(shape), dtype] if shape is not None else type(batch).__name__


_TREE_SAMPLE_S = 0.05


def _tree_cpu() -> dict[int, float]:
    """CPU seconds (user + system) so far of this process and each process below it (workers), by pid."""
    try:
        import psutil
    except ImportError:
        return {}
    me = psutil.Process()
    out: dict[int, float] = {}
    for proc in [me, *me.children(recursive=True)]:
        try:
            t = proc.cpu_times()
        except psutil.Error:
            continue
        out[proc.pid] = t.user + t.system
    return out


def measure_throughput(factory: Callable[[], Iterator[Any]], count: Callable[[Any], int],
                       limit_records: int | None, time_cap_s: float | None) -> dict[str, Any]:
    t0 = time.perf_counter()
    it = factory()
    first = next(it)
    t1 = time.perf_counter()
    c1 = time.process_time()
    tree1 = _tree_cpu()
    tree_last = dict(tree1)  # the latest CPU seen of each process: workers may exit at the epoch's end
    next_sample = t1 + _TREE_SAMPLE_S
    n_first = count(first)
    records, batches, exhausted = n_first, 1, False
    shapes = _describe(first)
    del first
    perf = time.perf_counter
    batch = None
    while True:
        if limit_records is not None and records >= limit_records:
            break
        if time_cap_s is not None and perf() - t1 >= time_cap_s:
            break
        try:
            batch = next(it)
        except StopIteration:
            exhausted = True
            break
        records += count(batch)
        batches += 1
        if tree1 and perf() >= next_sample:
            tree_last.update(_tree_cpu())
            next_sample = perf() + _TREE_SAMPLE_S
    t2 = time.perf_counter()
    cpu = time.process_time() - c1
    tree_last.update(_tree_cpu())
    tree_cpu = sum(t - tree1.get(pid, 0.0) for pid, t in tree_last.items()) if tree1 else None
    del batch
    close = getattr(it, "close", None)
    if close is not None:
        close()
    del it
    gc.collect()
    t3 = time.perf_counter()
    steady_s = t2 - t1
    return {
        "records": records, "batches": batches, "exhausted": exhausted,
        "ttfb_s": t1 - t0, "total_s": t2 - t0, "shutdown_s": t3 - t2,
        "records_per_s": (records - n_first) / steady_s if steady_s > 0 and records > n_first else None,
        "epoch_records_per_s": records / (t2 - t0),
        # CPU seconds of this process (all its threads, not its worker processes) after the first
        # batch: far less sensitive than wall time to other work on a shared machine.
        "cpu_s": cpu,
        "records_per_cpu_s": (records - n_first) / cpu if cpu > 0 and records > n_first else None,
        # The same with the CPU of the worker processes too (psutil): the per-core figure of a run
        # with workers (a worker's CPU after the last sample before it exited is not counted).
        "tree_cpu_s": tree_cpu,
        "records_per_tree_cpu_s": (records - n_first) / tree_cpu if tree_cpu and records > n_first else None,
        "first_batch": shapes,
    }


def run(spec: dict[str, Any]) -> dict[str, Any]:
    from benchmarks.loaders import Unavailable

    t_imp = time.perf_counter()
    try:
        module = importlib.import_module(f"benchmarks.loaders.{spec['module']}")
    except ImportError as e:
        return {"status": "unavailable", "reason": f"cannot import {spec['module']}: {e}"}
    out: dict[str, Any] = {"import_s": time.perf_counter() - t_imp, "startup_s": t_imp - _T_START}
    kind, cfg, data = spec["kind"], spec["config"], spec.get("data") or {}
    rss0 = _rss_mib()
    peak0 = _hwm_mib()
    try:
        if kind == "throughput":
            factory, count = module.pipeline(spec["workload"], cfg, data)
            out.update(measure_throughput(factory, count, spec.get("limit_records"), spec.get("time_cap_s")))
        elif kind == "restore":
            out.update(module.restore(cfg, data))
        elif kind == "sampler":
            out.update(module.sampler_first_indices(cfg))
            # The growth of RSS, or of the peak RSS when the run pushed it past the peak of the imports.
            peak = _hwm_mib()
            out["extra_rss_mib"] = max(_rss_mib() - rss0, peak - max(peak0, rss0), 0.0)
        else:
            raise ValueError(kind)
    except Unavailable as e:
        return {"status": "unavailable", "reason": str(e)}
    except Exception as e:
        return {"status": "error", "reason": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()}
    out["status"] = "ok"
    out["rss_before_mib"] = rss0
    out["peak_rss_self_mib"] = _hwm_mib()
    return out


def main() -> None:
    with open(sys.argv[1]) as f:
        spec = json.load(f)
    result = run(spec)
    with open(spec["result_path"] + ".tmp", "w") as f:
        json.dump(result, f)
    os.replace(spec["result_path"] + ".tmp", spec["result_path"])


if __name__ == "__main__":
    main()
