"""plot_timeline: the per-stage timeline of a trace, as the tf.data performance guide draws it.

One row per process (the main process, then each worker), time along the x axis,
one colored bar per stage of each chunk or batch. Nested stages (a read inside a
``next()`` call, with ``worker_count=0``) are drawn as thinner bars over their parent.
matplotlib is imported when called (``pip install thresher[plot]``); no global
backend is set (the figure draws with Agg directly).

Example:
    >>> import os, tempfile
    >>> import thresher as th
    >>> loader = th.DataLoader(th.sources.RangeDataSource(0, 100), th.IndexSampler(100),
    ...                        [lambda x: x * 2, th.Batch(10)])
    >>> with th.trace() as tracer:
    ...     _ = list(loader)
    >>> png = th.plot_timeline(tracer, os.path.join(tempfile.mkdtemp(), "timeline.png"))
    >>> open(png, "rb").read(4)
    b'\\x89PNG'
"""

from __future__ import annotations

import json
import os
from typing import Any, Union

from thresher._optional import require
from thresher.loader.profiling.tracing import Tracer

__all__ = ["plot_timeline"]

TraceLike = Union[Tracer, dict, str, "os.PathLike[str]"]

_QUIET = {"next()": "#bdbdbd", "outside next()": "#e5f2e5"}  # the loop: waiting, its own step


def _load(trace: TraceLike) -> dict[str, Any]:
    if isinstance(trace, Tracer):
        return trace.to_json()
    if isinstance(trace, dict):
        return trace
    with open(os.fspath(trace)) as f:
        loaded = json.load(f)
    return loaded if isinstance(loaded, dict) else {"traceEvents": loaded}


def _depths(events: list[dict[str, Any]]) -> list[int]:
    """The nesting depth of each event of one thread (events sorted by start)."""
    ends: list[float] = []
    out = []
    for e in events:
        start, end = e["ts"], e["ts"] + e["dur"]
        while ends and ends[-1] <= start + 1e-3:
            ends.pop()
        out.append(len(ends))
        ends.append(end)
    return out


def plot_timeline(trace: TraceLike, path: str | os.PathLike[str], *, title: str | None = None,
                  width: float = 14.0) -> str:
    """Draws ``trace`` (a Tracer, its JSON dict, or a trace file) into the PNG ``path``.

    Returns the path written. See the module docstring for an example.
    """
    FigureCanvasAgg = require("matplotlib.backends.backend_agg", "plot_timeline").FigureCanvasAgg
    Figure = require("matplotlib.figure", "plot_timeline").Figure
    Patch = require("matplotlib.patches", "plot_timeline").Patch

    doc = _load(trace)
    events = [e for e in doc.get("traceEvents", []) if e.get("ph") == "X"]
    names: dict[int, str] = {}
    order: dict[int, int] = {}
    threads: dict[tuple[int, int], str] = {}
    for e in doc.get("traceEvents", []):
        if e.get("ph") != "M":
            continue
        if e.get("name") == "process_name":
            names[e["pid"]] = e["args"]["name"]
        elif e.get("name") == "process_sort_index":
            order[e["pid"]] = e["args"]["sort_index"]
        elif e.get("name") == "thread_name":
            threads[(e["pid"], e["tid"])] = e["args"]["name"]
    rows = sorted({(e["pid"], e["tid"]) for e in events}, key=lambda r: (order.get(r[0], 1 << 30), r))
    t0 = min((e["ts"] for e in events), default=0.0)
    stage_names: list[str] = []
    for e in events:
        if e["name"] not in stage_names:
            stage_names.append(e["name"])
    fig = Figure(figsize=(width, 1.2 + 0.55 * max(1, len(rows))))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    palette = [c for i, c in enumerate(_tab20()) if i % 2 == 0] + [c for i, c in enumerate(_tab20()) if i % 2]
    colors: dict[str, Any] = {}
    k = 0
    for n in stage_names:
        if n in _QUIET:
            colors[n] = _QUIET[n]
        else:
            colors[n] = palette[k % len(palette)]
            k += 1
    labels = []
    for y, (pid, tid) in enumerate(rows):
        mine = sorted((e for e in events if e["pid"] == pid and e["tid"] == tid),
                      key=lambda e: (e["ts"], -e["dur"]))
        depths = _depths(mine)
        bars: dict[tuple[str, int], list[tuple[float, float]]] = {}
        for e, d in zip(mine, depths, strict=False):
            bars.setdefault((e["name"], d), []).append(((e["ts"] - t0) / 1e3, e["dur"] / 1e3))
        for (name, d), spans in sorted(bars.items(), key=lambda kv: kv[0][1]):
            height = 0.8 * (0.75 ** d)
            ax.broken_barh(spans, (y - height / 2, height), facecolors=colors[name],
                           edgecolor="none" if name in _QUIET else "black", linewidth=0.2)
        label = names.get(pid, f"pid {pid}")
        if (pid, tid) in threads and sum(1 for r in rows if r[0] == pid) > 1:
            label += f" / {threads[(pid, tid)]}"
        labels.append(label)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels(labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("time (ms)")
    ax.set_title(title or "thresher timeline: one row per process, one bar per stage of a chunk or batch",
                 fontsize=10)
    ax.legend(handles=[Patch(facecolor=colors[n], edgecolor="black", linewidth=0.3, label=n) for n in stage_names],
              loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False)
    fig.tight_layout()
    fig.savefig(os.fspath(path), dpi=100)
    return os.fspath(path)


def _tab20() -> list[Any]:
    from matplotlib import colormaps

    cmap = colormaps["tab20"]
    return [cmap(i) for i in range(20)]
