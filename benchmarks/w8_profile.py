"""Where W8's CPU time goes, thresher against the PyTorch DataLoader, in process.

    python -m benchmarks.w8_profile                 # 3 rounds of 768 images each

Both loaders run W8 with the same functions (``work.w8_decode``, ``work.w8_augment``,
batches of 256) with ``worker_count=0`` / ``num_workers=0`` in this one process,
interleaved (thresher, torch, thresher, torch, ...), under ``cProfile`` with the
process's CPU clock. Each run is split into the time inside the two W8 functions
(the same code in both loaders), the time stacking batches (``np.stack`` in PyTorch's
collate; thresher's ``Batch``), and the rest (reads, per-record bookkeeping, the
loader itself). The last line is the ceiling this leaves: PyTorch's CPU time per image
over the time of the W8 functions alone, i.e. thresher's advantage per core if
everything thresher does around the functions cost nothing.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import time
from collections.abc import Callable, Iterator
from typing import Any

from benchmarks import cases, datasets, work

_FUNCTIONS = ("w8_decode", "w8_augment")
_STACKING = {"thresher": "_stack_leaves", "torch": "_w3_collate"}


def _thresher(data: dict[str, Any]) -> Callable[[], Iterator[Any]]:
    import thresher as th

    source = th.sources.ArrayRecordSource(data["path"])
    loader = th.DataLoader(source, th.IndexSampler(len(source), shuffle=True, seed=work.SEED),
                           [work.w8_decode, th.RandomMapTransform(work.w8_augment),
                            th.Batch(work.W8_BATCH, drop_remainder=True)])
    return lambda: iter(loader)


def _torch(data: dict[str, Any]) -> Callable[[], Iterator[Any]]:
    from benchmarks.loaders import torch_loader

    return lambda: iter(torch_loader._loader("W8", {"workers": 0, "batched": True}, data))


def _cumulative(stats: pstats.Stats, name: str, module: str = "") -> float:
    """CPU seconds inside functions called ``name`` (outermost calls only: cumulative time)."""
    total = 0.0
    for (filename, _, function), (_, _, _, cumulative, _) in stats.stats.items():  # type: ignore[attr-defined]
        if function == name and module in filename:
            total += cumulative
    return total


def profile_once(make: Callable[[], Iterator[Any]], images: int, stacking: str) -> dict[str, float]:
    it = make()
    next(it)  # the first batch (start-up, file opening) is not steady state
    prof = cProfile.Profile(time.process_time)
    c0 = time.process_time()
    prof.enable()
    n = 0
    for batch in it:
        n += len(batch)
        if n >= images:
            break
    prof.disable()
    cpu = time.process_time() - c0
    stats = pstats.Stats(prof)
    functions = sum(_cumulative(stats, f, "benchmarks/work.py") for f in _FUNCTIONS)
    stack = _cumulative(stats, stacking, "thresher/transforms/batch.py" if stacking == "_stack_leaves" else "torch_loader")
    return {"images": n, "cpu_s": cpu, "ms_per_image": 1e3 * cpu / n, "functions": functions / cpu,
            "stacking": stack / cpu, "rest": max(0.0, 1 - (functions + stack) / cpu),
            "functions_ms_per_image": 1e3 * functions / n}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.w8_profile", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--images", type=int, default=768)
    ap.add_argument("--cache", default="benchmarks/results/data")
    args = ap.parse_args(argv)
    data = datasets.ensure(args.cache, "jpeg", cases.FULL["W8"])
    loaders = {"thresher": _thresher(data), "torch": _torch(data)}
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in loaders}
    for r in range(args.rounds):
        for name, make in loaders.items():
            res = profile_once(make, args.images, _STACKING[name])
            runs[name].append(res)
            print(f"  [{r + 1}/{args.rounds}] {name:<8} {res['ms_per_image']:.3f} CPU-ms/image: W8 functions "
                  f"{100 * res['functions']:.1f}%, stacking {100 * res['stacking']:.1f}%, rest "
                  f"{100 * res['rest']:.1f}%", flush=True)
    med = {name: {k: statistics.median(x[k] for x in rs) for k in rs[0]} for name, rs in runs.items()}
    print(f"\nW8 in process under cProfile (CPU clock), medians of {args.rounds} (machine shared)")
    for name, m in med.items():
        print(f"  {name:<8} {1e3 / m['ms_per_image']:6.0f} images/CPU-s  W8 functions {100 * m['functions']:5.1f}%  "
              f"stacking {100 * m['stacking']:4.1f}%  rest {100 * m['rest']:4.1f}%")
    t, p = med["thresher"], med["torch"]
    functions = statistics.median([x["functions_ms_per_image"] for rs in runs.values() for x in rs])
    print(f"  thresher / torch per CPU-s: {p['ms_per_image'] / t['ms_per_image']:.2f}x; ceiling with the same "
          f"functions (torch's time / the functions' time alone): {p['ms_per_image'] / functions:.2f}x")


if __name__ == "__main__":
    main()
