"""Time to first batch with 2 workers, in a fresh process that has imported jax and torch.

    python -m benchmarks.ttfb_fresh                 # 5 rounds
    python -m benchmarks.ttfb_fresh --rounds 7 --pause 1.0

Each measurement is a new interpreter (``python -c``) that imports jax, torch and the
loader, then times W1's pipeline (ArrayRecord, 60,000 MNIST-like records, shuffle,
decode, random flip, Batch(128)) to its first batch, with 2 workers: from ``iter()``
and from the DataLoader's construction. ``--pause S`` waits S seconds between the two
(what a user does there: build and compile the model); the construction figure leaves
the pause out. Rows run interleaved: thresher (every chunk in a worker, the default;
``warm_start=True``), and the PyTorch DataLoader (fork and spawn) with the same
functions. Imports are not counted (they are the same for all).

The fork server is a fresh interpreter that imports thresher: the package is byte-compiled
first (``compileall``, as ``pip install`` does), so a ``PYTHONDONTWRITEBYTECODE``
environment does not make every server compile it from source. thresher rows also say
what the fork server's start cost in CPU (a user who never iterates pays that, in a
background process).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics

_CHILD = r"""
import sys, time, json
import jax, torch
sys.path.insert(0, {root!r})
from benchmarks.loaders import {module} as m
factory, count = m.pipeline("TTFB", {cfg!r}, {data!r})
t0 = time.perf_counter()
loader = m._loader("TTFB", {cfg!r}, {data!r})
built = time.perf_counter() - t0
time.sleep({pause!r})
t = time.perf_counter()
it = iter(loader)
batch = next(it)
ttfb = time.perf_counter() - t
close = getattr(it, "close", None)
if close: close()
server = {{}}
if "thresher" in {module!r}:
    import psutil
    from thresher.loader import warm_start
    warm_start.wait(60.0)
    for p in psutil.Process().children():
        if "forkserver" in " ".join(p.cmdline()):
            server = {{"server_cpu_s": sum(p.cpu_times()[:2]), "server_rss_mib": p.memory_info().rss / 2**20}}
print(json.dumps({{"ttfb_s": ttfb, "from_construction_s": built + ttfb, "records": count(batch),
                  **server}}))
"""

ROWS = (("thresher w2", "thresher_loader", {"workers": 2}),
        ("thresher w2 warm_start=True", "thresher_loader", {"workers": 2, "warm_start": True}),
        ("torch w2 (fork)", "torch_loader", {"workers": 2}),
        ("torch w2 (spawn)", "torch_loader", {"workers": 2, "context": "spawn"}))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.ttfb_fresh", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--cache", default="benchmarks/results/data")
    ap.add_argument("--rows", default="", help="comma-separated row names (default: all)")
    ap.add_argument("--pause", type=float, default=0.0,
                    help="seconds between the construction and iter() (the model's build; default 0)")
    ap.add_argument("--out", default="benchmarks/results/results_ttfb_fresh.json")
    args = ap.parse_args(argv)
    from benchmarks import datasets, fresh

    data = datasets.ensure(args.cache, "mnist", 60_000)
    import compileall

    import thresher

    compileall.compile_dir(os.path.dirname(thresher.__file__), quiet=1)
    rows = [r for r in ROWS if not args.rows or r[0] in args.rows.split(",")]
    runs: dict[str, list[float]] = {name: [] for name, _, _ in rows}
    built: dict[str, list[float]] = {name: [] for name, _, _ in rows}
    server: dict[str, list[float]] = {name: [] for name, _, _ in rows}
    child = _CHILD.replace("{pause!r}", repr(args.pause))
    for r, name, res in fresh.interleaved(child, rows, args.rounds, data, 300):
        runs[name].append(res["ttfb_s"])
        built[name].append(res["from_construction_s"])
        extra = ""
        if "server_cpu_s" in res:
            server[name].append(res["server_cpu_s"])
            extra += f"; fork server: {res['server_cpu_s']:.2f} s CPU, {res['server_rss_mib']:.0f} MiB"
        print(f"  [{r + 1}/{args.rounds}] {name:<28} TTFB from iter() {res['ttfb_s']:.3f} s, from construction "
              f"{res['from_construction_s']:.3f} s{extra} (load {os.getloadavg()[0]:.1f})", flush=True)
    print(f"\nTTFB, 2 workers, fresh process with jax + torch imported, {args.pause:g} s between construction and "
          f"iter() (median of {args.rounds}; machine shared)")
    for name, ts in runs.items():
        if ts:
            print(f"  {name:<28} from iter() {statistics.median(ts):.3f} s (min {min(ts):.3f}, max {max(ts):.3f});"
                  f" from construction {statistics.median(built[name]):.3f} s"
                  + (f"; the fork server's start {statistics.median(server[name]):.2f} s CPU" if server[name] else ""))
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out + ".tmp", "w") as f:
        json.dump({"pause_s": args.pause, "runs": runs, "from_construction": built,
                   "medians": {k: statistics.median(v) for k, v in runs.items() if v},
                   "medians_from_construction": {k: statistics.median(v) for k, v in built.items() if v},
                   "fork_server_cpu_s": server, "load": os.getloadavg()}, f, indent=1)
    os.replace(args.out + ".tmp", args.out)


if __name__ == "__main__":
    main()
