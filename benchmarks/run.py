"""Entry point: ``python -m benchmarks.run [--quick] [--only W1,W3] [--repeats 3] [--out benchmarks/results]``.

For each workload, the runs of its rows are interleaved (A B C A B C ...), each in a
fresh subprocess with a timeout; the report gives medians over repeats.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from typing import Any

from benchmarks import cases as cases_mod
from benchmarks import datasets, report
from benchmarks.runner import run_case


def _data(workload: str, sizes: dict[str, Any], cache: str) -> dict[str, Any]:
    if workload in ("W2", "W2S"):
        return {"num_records": sizes["W2"], "payload_bytes": 8 * sizes["W2"]}
    kind = cases_mod.DATASET_OF.get(workload)
    if kind is None:
        return {}
    n = sizes[{"mnist": "W1", "images": "W3", "tokens": "W6", "jpeg": "W8"}[kind]]
    return datasets.ensure(cache, kind, n)


def _expected(workload: str, data: dict[str, Any]) -> int | None:
    n = data.get("num_records")
    batch = {"W1": 128, "W3": 64, "W6": 64, "TTFB": 128, "W8": 256}.get(workload)
    if n is None:
        return None
    return n if batch is None else n // batch * batch


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__)
    ap.add_argument("--quick", action="store_true", help="smaller data, time-capped runs, 1 repeat (< 2 min)")
    ap.add_argument("--tiny", action="store_true", help=argparse.SUPPRESS)  # the smoke test's sizes
    ap.add_argument("--only", default="", help="comma-separated workloads, e.g. W1,W3 (default: all)")
    ap.add_argument("--loaders", default="", help="comma-separated families: thresher,grain,torch,bare")
    ap.add_argument("--repeats", type=int, default=None, help="runs per row (default 3; 1 with --quick)")
    ap.add_argument("--out", default="benchmarks/results", help="output directory (results, chart, data cache)")
    ap.add_argument("--cache", default=None, help="dataset cache directory (default OUT/data)")
    ap.add_argument("--timeout", type=float, default=None, help="seconds per run (default 600; 60 quick)")
    ap.add_argument("--no-plot", action="store_true")
    ap.add_argument("--size", action="append", default=[], metavar="WORKLOAD=N",
                    help="records of a workload's dataset instead of the mode's, e.g. W8=3072 (12 batches of "
                         "256, where the default 1,536 is mostly the workers' start); repeatable")
    args = ap.parse_args(argv)

    mode = "tiny" if args.tiny else "quick" if args.quick else "full"
    sizes = dict({"tiny": cases_mod.TINY, "quick": cases_mod.QUICK, "full": cases_mod.FULL}[mode])
    for item in args.size:
        name, _, n = item.partition("=")
        if name.strip().upper() not in ("W1", "W2", "W3", "W6", "W8") or not n.strip().isdigit():
            ap.error(f"--size takes WORKLOAD=N for W1, W2, W3, W6 or W8, got {item!r}")
        sizes[name.strip().upper()] = int(n)
    repeats = args.repeats or (1 if mode != "full" else 3)
    timeout = args.timeout or (600.0 if mode == "full" else 60.0)
    workloads = [w.strip().upper() for w in args.only.split(",") if w.strip()] or list(cases_mod.WORKLOADS)
    families = {f.strip() for f in args.loaders.split(",") if f.strip()}
    for w in workloads:
        if w not in cases_mod.WORKLOADS:
            ap.error(f"unknown workload {w!r}; known: {', '.join(cases_mod.WORKLOADS)}")
    os.makedirs(args.out, exist_ok=True)
    cache = args.cache or os.path.join(args.out, "data")

    t_start = time.perf_counter()
    print(f"thresher benchmarks: mode={mode}, repeats={repeats}, workloads={','.join(workloads)}, "
          f"cpus={os.cpu_count()}" + "".join(f", {item}" for item in args.size), flush=True)
    if mode != "full":
        print(f"  {mode} mode: {report.mode_note(sizes)}", flush=True)
    rows: list[dict[str, Any]] = []
    for w in workloads:
        t_data = time.perf_counter()
        data = _data(w, sizes, cache)
        if time.perf_counter() - t_data > 1:
            print(f"  [{w}] generated its dataset in {time.perf_counter() - t_data:.1f} s", flush=True)
        cs = [c for c in cases_mod.cases(w, sizes, quick=mode != "full") if not families or c.family in families]
        if w == "TTFB" and "W1" in workloads:
            cs = [c for c in cs if c.config.get("context") == "spawn"]  # the rest comes from W1's 2-worker rows
        runs: dict[str, list[dict[str, Any]]] = {c.key: [] for c in cs}
        skip: set[str] = set()
        for r in range(repeats):
            for c in cs:
                if c.key in skip:
                    continue
                spec = {"workload": w, "module": c.module, "kind": c.kind, "config": c.config, "data": data,
                        "limit_records": None,
                        "time_cap_s": sizes["time_cap_s"]}
                if w == "TTFB":
                    spec["limit_records"] = 1
                res = run_case(spec, timeout)
                runs[c.key].append(res)
                tag = res["status"] if res["status"] != "ok" else ""
                print(f"  [{w} {r + 1}/{repeats}] {c.name:<44} {report.one_line(w, res)}  {report.left(res)} {tag}",
                      flush=True)
                if res["status"] == "unavailable":
                    skip.add(c.key)  # it will not appear between repeats
        for c in cs:
            rows.append(report.summarise(c, runs[c.key], data, _expected(w, data), sizes))

    results = {
        "mode": mode, "repeats": repeats, "sizes": sizes, "rows": rows,
        "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0], "platform": platform.platform()},
        "versions": report.versions(), "elapsed_s": time.perf_counter() - t_start,
        "command": " ".join(["python -m benchmarks.run"] + (argv if argv is not None else sys.argv[1:])),
    }
    results["ratios"] = report.ratios(rows)
    text = report.render(results)
    print(text)
    json_path = os.path.join(args.out, f"results_{mode}.json")
    with open(json_path, "w") as f:
        json.dump(results, f, indent=1, default=str)
    with open(os.path.join(args.out, f"results_{mode}.txt"), "w") as f:
        f.write(text + "\n")
    print(f"results: {json_path}")
    if not args.no_plot:
        png = report.plot(results, os.path.join(args.out, f"results_{mode}.png"))
        if png:
            print(f"chart:   {png}")
    print(f"total time {time.perf_counter() - t_start:.1f} s")
    leaked = report.leaks(rows)
    if leaked:
        print("LEAKS: these rows left processes or /dev/shm entries behind (exit code 1):\n  " + "\n  ".join(leaked))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
