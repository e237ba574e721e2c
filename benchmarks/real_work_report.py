"""One table and one chart for the real-work benchmarks (W2S, W8, W9, TTFB in a fresh process).

    python -m benchmarks.real_work_report --harness benchmarks/results/results_full.json \\
        --w9 benchmarks/results/results_w9.json --w9-step benchmarks/results/results_w9_step150.json \\
        --ttfb benchmarks/results/results_ttfb_fresh.json --epoch benchmarks/results/results_epoch_time.json \\
        --out benchmarks/snapshots/results_real_work

Reads what ``benchmarks.run --only W2S,W8``, ``benchmarks.llm_mix`` (twice: throughput,
and with a training step, ``--step-ms``), ``benchmarks.ttfb_fresh`` and ``benchmarks.epoch_time``
wrote, and writes OUT.txt (the table: every row, and thresher / peer ratios, wall clock and
per CPU second) and OUT.png.
"""

from __future__ import annotations

import argparse
import json
from typing import Any


def _load(path: str | None) -> Any:
    if not path:
        return None
    with open(path) as f:
        return json.load(f)


def _fmt(v: float | None, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def harness_lines(results: dict[str, Any]) -> tuple[list[str], list[tuple[str, str, float]]]:
    lines, bars = [], []
    for r in results["rows"]:
        if r.get("kind") != "throughput" or r["workload"] not in ("W2S", "W8"):
            continue
        per_core = r.get("records_per_cpu_s") if r["workers"] == 0 else None
        lines.append(f"  {r['workload']:<4} {r['name'][:58]:<58} {_fmt(r.get('records_per_s'), ',.0f'):>11} "
                     f"{_fmt(per_core, ',.0f'):>11}")
        if r.get("records_per_s"):
            bars.append((r["workload"], r["name"], float(r.get("records_per_cpu_s") or r["records_per_s"])))
    lines += ["", "  ratios thresher / peer (wall clock; per CPU second where both rows run in process):"]
    for x in results.get("ratios", []):
        if x["workload"] not in ("W2S", "W8") or x["ratio"] is None:
            continue
        who = {"default": "thresher", "packing": "thresher pack"}.get(x.get("thresher_config", "default"),
                                                                      "thresher best")
        met = "" if x["met"] is None else ("ok" if x["met"] else "MISSED (wall clock)")
        cpu = f"per CPU-s {x['cpu_ratio']:.2f}x" if x.get("cpu_ratio") else ""
        tgt = f">= {x['target']:g}" if x.get("target") is not None else ""
        lines.append(f"  {x['workload']:<4} w{x['workers']} {who:<13} vs {x['peer']:<28} {x['ratio']:6.2f}x  "
                     f"{cpu:<18} {tgt:<7} {met}")
    return lines, bars


def w9_lines(w9: dict[str, Any], step: dict[str, Any] | None) -> list[str]:
    lines = []
    for label, res in (("throughput", w9), ("with a training step", step)):
        if res is None:
            continue
        if res.get("step_ms"):
            label = f"with a {res['step_ms']:g} ms training step"
        lines.append(f"  W9 {label} (median of {res['rounds']} runs of {res['seconds']:g} s):")
        for name, m in res["medians"].items():
            restore = (f"  restore {1e3 * m['restore_s']:.0f} ms (CPU {1e3 * m['restore_cpu_s']:.0f}), "
                       f"deep {1e3 * m['restore_deep_s']:.0f} ms (CPU {1e3 * m['restore_deep_cpu_s']:.0f})"
                       if "restore_s" in m else "")
            lines.append(f"    {name:<24} {m['tokens_per_s'] / 1e6:6.2f} M tok/s  {m['tokens_per_cpu_s'] / 1e6:6.2f} "
                         f"M tok/CPU-s  p50 {m['p50_ms']:7.2f} ms  p99 {m['p99_ms']:7.2f} ms  "
                         f"padding {100 * m['padding']:.2f}%{restore}")
        med = res["medians"]
        for w in (0, 2):
            a, b = med.get(f"thresher w{w}"), med.get(f"grain w{w} (BestFitPack)")
            if a and b:
                lines.append(f"    w{w}: thresher / Grain {a['tokens_per_s'] / b['tokens_per_s']:.2f}x tokens/s"
                             + (f", {a['tokens_per_cpu_s'] / b['tokens_per_cpu_s']:.2f}x per CPU-s" if w == 0 else ""))
    return lines


def epoch_lines(res: dict[str, Any]) -> list[str]:
    """W8 epochs timed from the loader's construction (start-up included), each row against PyTorch's."""
    med = res["medians"]
    ref = med.get("torch w2 (fork)")
    lines = [f"  W8 epoch of {res['images']} images from the loader's construction, 2 workers, fresh process with "
             f"jax + torch (median of {max(len(v) for v in res['runs'].values())}):",
             f"    {'':<30} {'first':>7} {'third':>7} {'epoch':>7} {'img/s':>7} {'img/CPU-s':>10} {'/ torch':>8}"]
    for name, m in med.items():
        ratio = f"{m['images_per_s'] / ref['images_per_s']:.2f}x" if ref else "-"
        lines.append(f"    {name:<30} {m['ttfb_s']:>6.2f}s {m['third_s']:>6.2f}s {m['epoch_s']:>6.2f}s "
                     f"{m['images_per_s']:>7.0f} {m['images_per_cpu_s']:>10.0f} {ratio:>8}")
    return lines


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.real_work_report", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--harness", action="append", default=[], help="results_full.json of benchmarks.run (repeatable)")
    ap.add_argument("--w9")
    ap.add_argument("--w9-step")
    ap.add_argument("--ttfb")
    ap.add_argument("--load", default="loaded by other jobs", help="how loaded the machine was (for the header)")
    ap.add_argument("--epoch", help="results_epoch_time.json of benchmarks.epoch_time")
    ap.add_argument("--out", default="benchmarks/snapshots/results_real_work")
    args = ap.parse_args(argv)
    lines = ["== thresher on real work: shuffled W2, ImageNet-style JPEG (W8), LLM token mixture (W9), TTFB ==",
             f"   2 shared cores, {args.load}: wall-clock rates move by 2-5x",
             "   between runs; each workload's loaders ran interleaved in one invocation, so compare ratios, and",
             "   prefer the per-CPU-second figures for in-process rows.", "",
             f"  {'':<4} {'loader / config':<58} {'rec/s':>11} {'rec/CPU-s':>11}"]
    bars: list[tuple[str, str, float]] = []
    for path in args.harness:
        more, b = harness_lines(_load(path))
        lines += more + [""]
        bars += b
    w9 = _load(args.w9)
    if w9:
        lines += w9_lines(w9, _load(args.w9_step)) + [""]
    ttfb = _load(args.ttfb)
    if ttfb:
        lines.append(f"  TTFB, 2 workers, fresh process with jax + torch imported (median of "
                     f"{max(len(v) for v in ttfb['runs'].values())}):")
        for name, v in ttfb["medians"].items():
            lines.append(f"    {name:<20} {v:.3f} s")
    epoch = _load(args.epoch)
    if epoch:
        lines += [""] + epoch_lines(epoch)
    text = "\n".join(lines)
    print(text)
    with open(args.out + ".txt", "w") as f:
        f.write(text + "\n")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    panels = [("W2S", "records per CPU-s (in process) / per s (workers)"),
              ("W8", "images per CPU-s (main + workers, after the first batch)")]
    fig, axes = plt.subplots(1, 3, figsize=(18, 5))
    colours = {"thresher": "#d62728", "grain": "#1f77b4", "torch": "#ff7f0e", "bare": "#7f7f7f"}
    for ax, (w, label) in zip(axes, panels):
        rows = [(n, v) for ww, n, v in bars if ww == w]
        ax.barh([n[:48] for n, _ in rows][::-1], [v for _, v in rows][::-1],
                color=[colours.get(n.split()[0], "#f2a0a0") for n, _ in rows][::-1])
        ax.set_xscale("log")
        ax.set_title(f"{w}: {label}", fontsize=9)
        ax.tick_params(axis="y", labelsize=7)
    if w9:
        names = list(w9["medians"])
        ax = axes[2]
        ax.barh(names[::-1], [w9["medians"][n]["tokens_per_s"] / 1e6 for n in names][::-1],
                color=[colours["thresher" if n.startswith("thresher") else "grain"] for n in names][::-1])
        ax.set_title("W9: M real tokens/s (wall clock)", fontsize=9)
        ax.tick_params(axis="y", labelsize=7)
    fig.suptitle(f"thresher on real work (2 shared cores, {args.load}; loaders interleaved per workload)",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(args.out + ".png", dpi=100)
    plt.close(fig)


if __name__ == "__main__":
    main()
