"""Summaries (medians over repeats), ratios against targets, the printed tables and the chart."""

from __future__ import annotations

import statistics
import subprocess
from typing import Any, Iterable

from benchmarks.cases import Case

THROUGHPUT = ("W1", "W2", "W2S", "W3", "W6", "W8")


def _median(xs: Iterable[float | None]) -> float | None:
    v = [x for x in xs if x is not None]
    return statistics.median(v) if v else None


def versions() -> dict[str, str]:
    from importlib import metadata

    out = {}
    for pkg in ("numpy", "array_record", "grain", "torch"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = "not installed"
    try:
        out["thresher_git"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                             text=True, check=False).stdout.strip()
    except OSError:
        pass
    return out


def left(res: dict[str, Any]) -> str:
    """What a run (or row) left behind: processes and /dev/shm entries, always shown."""
    return f"left: {res.get('leftover_processes', 0)} proc, {len(res.get('leftover_shm') or [])} shm"


def leaks(rows: list[dict[str, Any]]) -> list[str]:
    """A line for each row whose runs left a process or a /dev/shm entry behind."""
    return [f"{r['workload']} {r['name']}: {left(r)} {sorted(r.get('leftover_shm') or [])}" for r in rows
            if r.get("leftover_processes") or r.get("leftover_shm")]


def one_line(workload: str, res: dict[str, Any]) -> str:
    """A progress line for one run."""
    if res["status"] == "unavailable":
        return f"unavailable: {res['reason'][:90]}"
    if res["status"] != "ok":
        return f"ERROR: {res['reason'][:120]}"
    if "records_per_s" in res and workload != "TTFB":
        rps = res["records_per_s"]
        return (f"{rps:>12,.0f} rec/s" if rps else f"{'-':>12}      ") + \
            f"  ttfb {res['ttfb_s']:.3f} s  {res['records']:>8,} rec  {res['peak_rss_total_mib']:.0f} MiB"
    if "ttfb_s" in res:
        return f"ttfb {res['ttfb_s']:.3f} s (import {res['import_s']:.2f} s)"
    if "restore_s" in res:
        return f"restore -> next batch {res['restore_s']:.4f} s{' (extrapolated)' if res.get('extrapolated') else ''}"
    if "first_1000_s" in res:
        return f"first 1,000 indices {res['first_1000_s'] * 1e3:.2f} ms, +{res['extra_rss_mib']:.1f} MiB " \
               f"(at n={res['measured_at']:,})"
    return ""


def summarise(case: Case, runs: list[dict[str, Any]], data: dict[str, Any], expected: int | None,
              sizes: dict[str, Any]) -> dict[str, Any]:
    """One table row: medians over the runs of ``case``."""
    row: dict[str, Any] = {"workload": case.workload, "name": case.name, "family": case.family,
                           "default": case.default, "workers": case.workers, "kind": case.kind,
                           "config": case.config, "runs": runs}
    row["leftover_processes"] = max((r.get("leftover_processes", 0) for r in runs), default=0)
    row["leftover_shm"] = sorted({n for r in runs for n in r.get("leftover_shm") or []})
    ok = [r for r in runs if r["status"] == "ok"]
    if not ok:
        bad = runs[-1] if runs else {"status": "error", "reason": "not run"}
        row.update(status=bad["status"], reason=bad.get("reason", ""))
        return row
    row["status"] = "ok" if len(ok) == len(runs) else "partial"
    if len(ok) < len(runs):
        row["reason"] = next(r.get("reason", "") for r in runs if r["status"] != "ok")
    row["n_runs"] = len(ok)
    row["peak_rss_mib"] = _median(max(r.get("peak_rss_total_mib") or 0, r.get("peak_rss_self_mib") or 0) for r in ok)
    row["import_s"] = _median(r.get("import_s") for r in ok)
    if case.kind == "throughput":
        rps = _median(r.get("records_per_s") for r in ok)
        row["records_per_s"] = rps
        row["epoch_records_per_s"] = _median(r.get("epoch_records_per_s") for r in ok)
        # In process: CPU of the process; with workers: of the process and its workers (per core).
        key = "records_per_cpu_s" if case.workers == 0 else "records_per_tree_cpu_s"
        row["records_per_cpu_s"] = _median(r.get(key) for r in ok)
        row["ttfb_s"] = _median(r.get("ttfb_s") for r in ok)
        row["shutdown_s"] = _median(r.get("shutdown_s") for r in ok)
        per_record = data.get("payload_bytes", 0) / data["num_records"] if data.get("num_records") else 0
        row["mb_per_s"] = rps * per_record / 1e6 if rps and case.workload not in ("W2", "W2S") else None
        last = ok[-1]
        row["records"] = last["records"]
        row["exhausted"] = last["exhausted"]
        row["expected_records"] = expected
        row["first_batch"] = last.get("first_batch")
        if last["exhausted"] and expected is not None and last["records"] != expected:
            row["shortfall"] = expected - last["records"]
    elif case.kind == "restore":
        row["restore_s"] = _median(r["restore_s"] for r in ok)
        row["restore_cold_s"] = _median(r.get("restore_cold_s") for r in ok)
        row["extrapolated"] = any(r.get("extrapolated") for r in ok)
        row["note"] = ok[-1].get("note", "")
        row["position"] = case.config["position"]
    elif case.kind == "sampler":
        n = case.config["num_records"]
        at = ok[-1]["measured_at"]
        factor = n / at
        row["measured_at"] = at
        row["first_1000_s"] = _median(r["first_1000_s"] for r in ok)
        row["extra_rss_mib"] = _median(r["extra_rss_mib"] for r in ok)
        row["extrapolated"] = factor != 1
        if factor != 1:
            row["measured_first_1000_s"] = row["first_1000_s"]
            row["measured_extra_rss_mib"] = row["extra_rss_mib"]
            row["first_1000_s"] *= factor
            row["extra_rss_mib"] *= factor
            row["note"] = f"measured at n={at:,}, extrapolated linearly x{factor:,.0f} to n={n:,}"
    return row


# -- ratios -------------------------------------------------------------------------------
# (workload, workers, peer label) -> target ratio thresher/peer (>= target is met).
TARGETS = {
    ("W1", 0, "torch"): 3.0, ("W1", 0, "bare"): 0.8, ("W1", 2, "torch"): 3.0, ("W1", 2, "2x bare"): 0.6,
    ("W2", 0, "torch"): 1.0, ("W2S", 0, "torch"): 2.0, ("W8", 0, "torch"): 1.3, ("W8", 2, "torch"): 1.3,
    ("W3", 0, "bare"): 0.9, ("W3", 2, "torch"): 1.4, ("W3", 2, "2x bare"): 0.75,
    ("W6", 0, "grain packing (default)"): 2.0, ("W6", 0, "grain packing (best)"): 2.0, ("W6", 0, "torch"): 1.0,
    ("W6", 0, "torch (best)"): 1.0,
    ("W6", 0, "bare"): 0.8,
}


def _best(rows: list[dict[str, Any]], key: str = "records_per_s") -> dict[str, Any] | None:
    ok = [r for r in rows if r.get(key)]
    return max(ok, key=lambda r: r[key]) if ok else None


def ratios(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """thresher / peer ratios per workload and worker count (> 1: thresher is faster)."""
    out: list[dict[str, Any]] = []

    def add(workload: str, workers: int, peer: str, th: dict[str, Any] | None, other: dict[str, Any] | None,
            value: float | None, metric: str, target: float | None = None, which: str = "default") -> None:
        if target is None and peer.startswith(("grain", "torch")):
            target = TARGETS.get((workload, workers, peer), 1.0)
        out.append({"workload": workload, "workers": workers, "peer": peer, "metric": metric, "thresher_config": which,
                    "thresher": th["name"] if th else None, "other": other["name"] if other else None,
                    "ratio": value, "target": target,
                    "met": None if value is None or target is None else value >= target,
                    "note": "" if value is not None else
                    ("no thresher result" if th is None or th.get("status") not in ("ok", "partial")
                     else "no peer result")})

    for w in THROUGHPUT:
        ws = [r for r in rows if r["workload"] == w and r["kind"] == "throughput"]
        if not ws:
            continue
        bares = [r for r in ws if r["family"] == "bare"]
        bare_ref = next((r for r in bares if r["default"] and r.get("records_per_s")), None)
        bare_best = _best(bares)
        for workers in sorted({r["workers"] for r in ws}):
            g = [r for r in ws if r["workers"] == workers]
            ths = [r for r in g if r["family"] == "thresher" and r["config"].get("variant") != "pack"]
            th_pack = next((r for r in g if r["family"] == "thresher" and r["config"].get("variant") == "pack"
                            and r.get("records_per_s")), None)
            th_default = next((r for r in ths if r["default"]), None)
            th_best = _best(ths)
            peers: list[tuple[str, dict[str, Any] | None, float]] = []
            grain = [r for r in g if r["family"] == "grain" and r["config"].get("variant") != "pack"]
            pack = [r for r in g if r["family"] == "grain" and r["config"].get("variant") == "pack"]
            torch = [r for r in g if r["family"] == "torch"]
            for label, cands in (("grain", grain), ("grain packing", pack), ("torch", torch)):
                if not cands:
                    continue
                d = next((r for r in cands if r["default"] and r.get("records_per_s")), None)
                b = _best(cands)
                name = "torch" if label == "torch" else f"{label} (default)"
                peers.append((name, d, 1.0))
                peers.append((f"{label} (best)", b, 1.0))
            prefix = "bare" if workers == 0 else f"{workers}x bare"
            if w in ("W2", "W2S"):  # one bare loop, no reads
                bare_ref, bare_best = bare_best, None
            mult = float(max(1, workers))
            if bare_ref is not None:
                peers.append((f"{prefix} (batched read)" if w not in ("W2", "W2S") else prefix, bare_ref, mult))
            if bare_best is not None and bare_best is not bare_ref:
                peers.append((f"{prefix} (best)", bare_best, mult))
            variants = [("default", th_default)]
            if th_best is not None and th_best is not th_default:
                variants.append(("best", th_best))
            if th_pack is not None:  # packing against packing: thresher.Dataset.pack vs Grain's
                for label, other, mult in peers:
                    if label.startswith("grain packing") and other and other.get("records_per_s"):
                        add(w, workers, label, th_pack, other, th_pack["records_per_s"] / other["records_per_s"],
                            "records/s", TARGETS.get((w, workers, label)), "packing")
            for which, th in variants:
                rate = th.get("records_per_s") if th else None
                for label, other, mult in peers:
                    value = rate / (other["records_per_s"] * mult) if rate and other else None
                    add(w, workers, label, th, other, value, "records/s",
                        TARGETS.get((w, workers, label.split(" (")[0] if "bare" in label else label)), which)
                    # The same ratio per CPU second (workers included): robust to other load on the machine.
                    # Records per CPU second of W bare loops are those of one (W times the records, W times
                    # the CPU): no multiplier here.
                    cpu_th = th.get("records_per_cpu_s") if th else None
                    cpu_other = other.get("records_per_cpu_s") if other else None
                    out[-1]["cpu_ratio"] = cpu_th / cpu_other if cpu_th and cpu_other else None

    _shuffle_cost(rows, out)
    w4 = {r["name"]: r for r in rows if r["workload"] == "W4" and r.get("restore_s")}
    for label in (("51,200", "10**12") if any(r["workload"] == "W4" for r in rows) else ()):
        th = w4.get(f"thresher @ {label}")
        for peer in (f"grain @ {label}", f"torch @ {label} (replay)"):
            other = w4.get(peer)
            value = other["restore_s"] / th["restore_s"] if th and other else None
            add("W4", 0, peer.split(" @")[0] + f" @ {label}", th, other, value, "restore speedup (peer s / thresher s)")
    a, b = w4.get("thresher @ 51,200"), w4.get("thresher @ 10**12")
    if a and b:
        v = b["restore_s"] / a["restore_s"]
        out.append({"workload": "W4", "workers": 0, "peer": "itself: time @10**12 / @51,200",
                    "metric": "time ratio, ~1 = same cost at both positions", "thresher_config": "default",
                    "thresher": b["name"], "other": a["name"], "ratio": v, "target": None,
                    "met": 0.5 <= v <= 2.0, "note": "target: within noise (0.5..2)"})

    ttfb = {r["family"]: r for r in sorted((r for r in ttfb_rows(rows) if r.get("ttfb_s")),
                                             key=lambda r: -r["ttfb_s"])}  # keeps each family's fastest
    th = ttfb.get("thresher")
    for fam in (("grain", "torch") if any(r["workload"] == "TTFB" for r in rows) else ()):
        other = ttfb.get(fam)
        value = other["ttfb_s"] / th["ttfb_s"] if th and other else None
        add("TTFB", 2, f"{fam} (best)", th, other, value, "TTFB speedup (peer s / thresher s)")

    w5 = [r for r in rows if r["workload"] == "W5" and r.get("first_1000_s")]
    th = min((r for r in w5 if r["family"] == "thresher"), key=lambda r: r["first_1000_s"], default=None)
    for fam in (("grain", "torch") if any(r["workload"] == "W5" for r in rows) else ()):
        other = next((r for r in w5 if r["family"] == fam), None)
        value = other["first_1000_s"] / th["first_1000_s"] if th and other else None
        add("W5", 0, fam, th, other, value, "first 1,000 indices speedup (peer s / thresher s)")
    return out


def _shuffle_cost(rows: list[dict[str, Any]], out: list[dict[str, Any]]) -> None:
    """W2S: the shuffled rate over the unshuffled one (run interleaved in the same workload)."""
    w2s = [r for r in rows if r["workload"] == "W2S" and r.get("records_per_s")]
    ref = next((r for r in w2s if r["family"] == "reference"), None)
    th = next((r for r in w2s if r["family"] == "thresher" and r["default"]), None)
    if ref is None or th is None:
        return
    cpu = (th.get("records_per_cpu_s") or 0) / (ref.get("records_per_cpu_s") or 1)
    v = th["records_per_s"] / ref["records_per_s"]
    out.append({"workload": "W2S", "workers": 0, "peer": "itself unshuffled", "metric": "records/s",
                "thresher_config": "default", "thresher": th["name"], "other": ref["name"], "ratio": v,
                "target": 0.7, "met": v >= 0.7, "note": "", "cpu_ratio": cpu or None})


def ttfb_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Time-to-first-batch rows: the TTFB workload's own, and W1's 2-worker rows."""
    own = [r for r in rows if r["workload"] == "TTFB"]
    names = {r["name"] for r in own}
    from_w1 = [dict(r, name=f"{r['name']} [W1 run]") for r in rows
               if r["workload"] == "W1" and r["workers"] == 2 and r["name"] not in names]
    return from_w1 + own


def absolute_targets(rows: list[dict[str, Any]]) -> list[tuple[str, str, bool | None]]:
    """The targets that are absolute figures, not ratios."""
    out: list[tuple[str, str, bool | None]] = []
    th_ttfb = [r for r in ttfb_rows(rows) if r["family"] == "thresher"]
    for r in th_ttfb:
        v = r.get("ttfb_s")
        out.append(("TTFB thresher w2 <= 0.3 s", "unavailable" if v is None else f"{v:.3f} s",
                    None if v is None else v <= 0.3))
    for r in rows:
        if r["workload"] == "W5" and r["family"] == "thresher" and r.get("first_1000_s") is not None:
            v, m = r["first_1000_s"], r["extra_rss_mib"]
            out.append((f"W5 {r['name']}: < 10 ms, < 50 MiB", f"{v * 1e3:.2f} ms, +{m:.1f} MiB", v < 0.010 and m < 50))
    return out


# -- rendering ------------------------------------------------------------------------------
def mode_note(sizes: dict[str, Any]) -> str:
    """What a reduced mode changes, for the printed output."""
    return (f"W6 has {sizes['W6']:,} records (full: 1,000,000); throughput runs stop {sizes['time_cap_s']} s after "
            f"the first batch, so record counts are partial (*) and slow starters (Grain) are measured early; "
            f"W4's PyTorch replay is capped at {sizes['W4_replay_cap']:,} records and extrapolated; W5's "
            f"PyTorch/numpy rows are measured at n={sizes['W5_torch']:,} and extrapolated; rows marked "
            f"full-only are left out; 1 repeat unless --repeats")


def _fmt(v: float | None, spec: str, dash: str = "-") -> str:
    return dash if v is None else format(v, spec)


def _status(row: dict[str, Any]) -> str:
    if row["status"] in ("unavailable", "error"):
        return f"{row['status'].upper()}: {row.get('reason', '')[:70]}"
    notes = []
    if row["status"] == "partial":
        notes.append(f"some runs failed: {row.get('reason', '')[:50]}")
    if row.get("shortfall"):
        notes.append(f"SHORT by {row['shortfall']:,} records")
    if row.get("leftover_processes") or row.get("leftover_shm"):
        notes.append(f"LEAK {left(row)}")
    if row.get("note"):
        notes.append(row["note"])
    return "; ".join(notes)


def render(results: dict[str, Any]) -> str:
    rows, mode = results["rows"], results["mode"]
    lines = [f"== thresher benchmarks ({mode} mode, median of {results['repeats']} run(s) per row, "
             f"{results['machine']['cpus']} CPUs shared: absolute figures are noisy, compare ratios) =="]
    if mode != "full":
        lines.append(f"   {mode} mode: {mode_note(results['sizes'])}")
    lines.append("   rec/s: records/s after the first batch (steady state, wall clock); rec/CPU-s: the same records per "
                 "CPU second of the process, with workers of the process and its worker processes (robust to "
                 "other load); MB/s: record payload read per second; RSS: peak of main + workers")
    hdr = f"{'workload':<6} {'loader / config':<46} {'rec/s':>11} {'rec/CPU-s':>10} {'MB/s':>7} {'RSS MiB':>8} {'TTFB s':>7} " \
          f"{'records':>17}  notes"
    lines += ["", hdr, "-" * len(hdr)]
    for r in rows:
        if r["kind"] != "throughput" or r["workload"] == "TTFB":
            continue
        recs = f"{r['records']:,}/{r['expected_records']:,}" if r.get("records") is not None and \
            r.get("expected_records") else _fmt(r.get("records"), ",")
        if r.get("records") is not None and not r.get("exhausted"):
            recs += "*"
        lines.append(f"{r['workload']:<6} {r['name'][:46]:<46} {_fmt(r.get('records_per_s'), ',.0f'):>11} "
                     f"{_fmt(r.get('records_per_cpu_s'), ',.0f'):>10} "
                     f"{_fmt(r.get('mb_per_s'), '.1f'):>7} {_fmt(r.get('peak_rss_mib'), '.0f'):>8} "
                     f"{_fmt(r.get('ttfb_s'), '.3f'):>7} {recs:>17}  {_status(r)}")
    lines.append("   (* = run stopped before the end of the epoch: time cap)")

    restore = [r for r in rows if r["workload"] == "W4"]
    if restore:
        lines += ["", "W4: fresh DataLoader + set_state -> next batch (worker_count=0; median of 5 fresh restores a run)",
                  "-" * 64]
        for r in restore:
            cold = f"(first, cold: {r['restore_cold_s']:.4f} s)" if r.get("restore_cold_s") else ""
            lines.append(f"  {r['name']:<36} {_fmt(r.get('restore_s'), ',.4f'):>20} s  {cold:<26} {_status(r)}")
    ttfb = ttfb_rows(rows)
    if ttfb:
        lines += ["", "TTFB: time to first batch, W1 pipeline, 2 workers (imports excluded)", "-" * 64]
        for r in ttfb:
            lines.append(f"  {r['name']:<52} {_fmt(r.get('ttfb_s'), '.3f'):>8} s  import "
                         f"{_fmt(r.get('import_s'), '.2f')} s  {_status(r)}")
    w5 = [r for r in rows if r["workload"] == "W5"]
    if w5:
        lines += ["", "W5: sampler over 10**9 records: first 1,000 indices", "-" * 64]
        for r in w5:
            lines.append(f"  {r['name']:<36} {_fmt(r.get('first_1000_s') and r['first_1000_s'] * 1e3, '.2f'):>10} ms "
                         f" +{_fmt(r.get('extra_rss_mib'), ',.1f')} MiB  {_status(r)}")

    rs = results.get("ratios") or []
    if rs:
        lines += ["", "Ratios thresher / peer (> 1 = thresher ahead; targets from issues 2, 3, 6; judged on wall-clock "
                  "rec/s; with the ratio per CPU second, workers' CPU included)", "-" * 64]
        for x in rs:
            met = "" if x["met"] is None else ("  ok" if x["met"] else "  MISSED")
            tgt = "" if x["target"] is None else f">= {x['target']:g}"
            config = x.get("thresher_config", "default")
            who = {"default": "thresher", "packing": "thresher pack"}.get(config, "thresher best")
            lines.append(f"  {x['workload']:<5} w{x['workers']}  {who:<13} vs {x['peer']:<28} "
                         f"{_fmt(x['ratio'], '.2f', '   n/a'):>8}{'x' if x['ratio'] is not None else ' '}  "
                         f"{tgt:<7}{met:<8}"
                         f"{'  per CPU-s ' + format(x['cpu_ratio'], '.2f') + 'x' if x.get('cpu_ratio') else ''}"
                         f"{'  (' + x['note'] + ')' if x.get('note') else ''}")
    ab = absolute_targets(rows)
    if ab:
        lines += ["", "Absolute targets", "-" * 64]
        for name, value, met in ab:
            lines.append(f"  {name:<44} {value:<22} {'' if met is None else ('ok' if met else 'MISSED')}")
    return "\n".join(lines)


def plot(results: dict[str, Any], path: str) -> str | None:
    """A bar chart per workload (log scale); returns the path, or None without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    colours = {"thresher": "#d62728", "reference": "#f2a0a0", "grain": "#1f77b4", "torch": "#ff7f0e", "bare": "#7f7f7f"}
    rows = results["rows"]
    panels: list[tuple[str, str, list[tuple[str, float, str]]]] = []
    for w in THROUGHPUT:
        bars = [(r["name"], r["records_per_s"], r["family"]) for r in rows
                if r["workload"] == w and r.get("records_per_s")]
        if bars:
            panels.append((w, "records/s (higher is better)", bars))
    for w, key, label, scale in (("W4", "restore_s", "restore -> next batch, s (lower is better)", 1.0),
                                 ("TTFB", "ttfb_s", "time to first batch, 2 workers, s (lower is better)", 1.0),
                                 ("W5", "first_1000_s", "first 1,000 of 10**9 indices, ms (lower is better)", 1e3)):
        src = ttfb_rows(rows) if w == "TTFB" else [r for r in rows if r["workload"] == w]
        bars = [(r["name"], r[key] * scale, r["family"]) for r in src if r.get(key)]
        if bars:
            panels.append((w, label, bars))
    if not panels:
        return None
    ncol = 2
    nrow = -(-len(panels) // ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(15, 3.2 * nrow + 0.5), squeeze=False)
    for ax, (w, label, bars) in zip(axes.flat, panels):
        names = [b[0] for b in bars][::-1]
        vals = [b[1] for b in bars][::-1]
        ax.barh(names, vals, color=[colours.get(b[2], "k") for b in bars][::-1])
        ax.set_xscale("log")
        ax.set_title(f"{w}: {label}", fontsize=9)
        ax.tick_params(axis="y", labelsize=7)
        ax.tick_params(axis="x", labelsize=7)
        for y, v in enumerate(vals):
            ax.text(v, y, f" {v:,.3g}", va="center", fontsize=6)
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    fig.suptitle(f"thresher benchmarks ({results['mode']} mode, {results['machine']['cpus']} CPUs, "
                 f"median of {results['repeats']})", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
