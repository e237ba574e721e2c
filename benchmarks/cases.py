"""The benchmark matrix: workloads, sizes per mode, and the loader configurations of each.

A Case is one row of the results table. ``family`` is thresher / grain / torch /
bare; ``default`` marks the peer's default setting (the others are its best-known
settings); ``workers`` groups rows for ratios (2-worker rows are compared with
"2x bare", twice the best in-process bare loop).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# The sizes the issues define, and the smaller ones --quick uses (reported as such).
# Full runs stop 30 s after the first batch: a loader that reads records one by one with
# array_record's read([k]) (Grain's ArrayRecordDataSource) would take hours over W6's 1M records.
FULL = {"W1": 60_000, "W2": 1_000_000, "W3": 8_000, "W6": 1_000_000, "W8": 1_536, "W5": 10**9, "W5_torch": 10**7,
        "W4_replay_cap": None, "time_cap_s": 30.0}
QUICK = {"W1": 60_000, "W2": 1_000_000, "W3": 8_000, "W6": 100_000, "W8": 768, "W5": 10**9, "W5_torch": 10**6,
         "W4_replay_cap": 2_560, "time_cap_s": 0.3}
TINY = {"W1": 2_000, "W2": 20_000, "W3": 200, "W6": 2_000, "W8": 520, "W5": 10**9, "W5_torch": 10**5,
        "W4_replay_cap": 256, "time_cap_s": 0.3}

DATASET_OF = {"W1": "mnist", "W3": "images", "W4": "mnist", "TTFB": "mnist", "W6": "tokens", "W8": "jpeg"}
WORKLOADS = ("W1", "W2", "W2S", "W3", "W4", "TTFB", "W5", "W6", "W8")


@dataclass(frozen=True)
class Case:
    workload: str
    name: str
    family: str
    module: str
    kind: str = "throughput"
    config: dict[str, Any] = field(default_factory=dict)
    workers: int = 0
    default: bool = True
    full_only: bool = False  # left out of --quick (a secondary variant) to keep it under 2 minutes

    @property
    def key(self) -> str:
        return f"{self.workload}/{self.name}"


def _t(w: str, name: str, workers: int = 0, default: bool = True, **cfg: Any) -> Case:
    return Case(w, name, "thresher", "thresher_loader", config=dict(cfg, workers=workers), workers=workers,
                default=default)


def _g(w: str, name: str, workers: int = 0, default: bool = True, **cfg: Any) -> Case:
    return Case(w, name, "grain", "grain_loader", config=dict(cfg, workers=workers), workers=workers, default=default)


def _p(w: str, name: str, workers: int = 0, default: bool = True, full_only: bool = False, **cfg: Any) -> Case:
    return Case(w, name, "torch", "torch_loader", config=dict(cfg, workers=workers), workers=workers, default=default,
                full_only=full_only)


def _b(w: str, name: str, full_only: bool = False, **cfg: Any) -> Case:
    return Case(w, name, "bare", "bare_loader", config=cfg, default=cfg.get("reads", "batch") == "batch",
                full_only=full_only)


def _image_cases(w: str) -> list[Case]:
    batch = 128 if w == "W1" else 64
    return [
        _t(w, "thresher w0"),
        _t(w, f"thresher w0 (chunk_size={16 * batch})", default=False, chunk_size=16 * batch),
        _g(w, "grain w0 (default: 16 read threads)"),
        _g(w, "grain w0 (num_threads=0)", default=False, threads=0),
        _p(w, "torch w0 (__getitem__ read([i]))"),
        _p(w, "torch w0 (__getitem__ read(i, i+1))", default=False, full_only=True, reads="range"),
        _p(w, "torch w0 (__getitems__ read(keys))", default=False, batched=True),
        _b(w, "bare (record by record, read([k]))", full_only=True, reads="record"),
        _b(w, "bare (record by record, read(k, k+1))", reads="range"),
        _b(w, "bare (one read(keys) per batch)", reads="batch"),
        _t(w, "thresher w2", workers=2),
        _t(w, "thresher w2 (worker threads)", workers=2, default=False, mode="thread"),
        _g(w, "grain w2 (default)", workers=2),
        _g(w, "grain w2 (num_threads=0)", workers=2, default=False, threads=0),
        _p(w, "torch w2 (__getitem__ read([i]), fork)", workers=2),
        _p(w, "torch w2 (__getitem__ read(i, i+1), fork)", workers=2, default=False, full_only=True, reads="range"),
        _p(w, "torch w2 (__getitems__ read(keys), fork)", workers=2, default=False, batched=True),
    ]


def _w8_cases() -> list[Case]:
    out = []
    for w in (0, 2):
        out += [_t("W8", f"thresher w{w}", workers=w),
                _t("W8", f"thresher w{w} (vision helper: reduced decode, OpenCV)", workers=w, default=False,
                   variant="reduced"),
                *([_t("W8", f"thresher w{w} (warm_start=True)", workers=w, default=False, warm_start=True),
                   _t("W8", f"thresher w{w} (worker threads)", workers=w, default=False, mode="thread"),
                   _t("W8", f"thresher w{w} (worker threads, vision helper)", workers=w, default=False,
                      mode="thread", variant="reduced")] if w else []),
                _g("W8", f"grain w{w} (num_threads=0)", workers=w, threads=0),
                _p("W8", f"torch w{w} (__getitems__ read(keys))", workers=w, batched=True),
                _p("W8", f"torch w{w} (vision helper: reduced decode, OpenCV)", workers=w, default=False,
                   batched=True, variant="reduced")]
    return out + [_b("W8", "bare (one read(keys) per batch)", reads="batch"),
                  _b("W8", "bare (vision helper: reduced decode, OpenCV)", reads="batch", variant="reduced")]


def cases(workload: str, sizes: dict[str, Any], quick: bool = False) -> list[Case]:
    """The rows of ``workload`` in run order (runs of a workload are interleaved)."""
    return [c for c in _cases(workload, sizes) if not (quick and c.full_only)]


def _cases(workload: str, sizes: dict[str, Any]) -> list[Case]:
    if workload in ("W1", "W3"):
        return _image_cases(workload)
    if workload == "W8":
        return _w8_cases()
    if workload == "W2":
        return [_t("W2", "thresher"), _t("W2", "thresher (chunk_size=4096)", default=False, chunk_size=4096),
                _g("W2", "grain (default)"),
                _g("W2", "grain (num_threads=0)", default=False, threads=0),
                _p("W2", "torch"), _b("W2", "bare (list comprehension + np.asarray)")]
    if workload == "W2S":  # W2 with a global shuffle; the unshuffled thresher row runs interleaved with it
        return [_t("W2S", "thresher (shuffle)"),
                _t("W2S", "thresher (shuffle, chunk_size=4096)", default=False, chunk_size=4096),
                Case("W2S", "thresher unshuffled (W2, reference)", "reference", "thresher_loader",
                     config={"workers": 0, "shuffle": False}),
                _g("W2S", "grain (shuffle, default)"),
                _g("W2S", "grain (shuffle, num_threads=0)", default=False, threads=0),
                _p("W2S", "torch (RandomSampler)"), _b("W2S", "bare (numpy permutation + list comprehension)")]
    if workload == "W4":
        out = []
        for pos, label in ((51_200, "51,200"), (10**12, "10**12")):
            out += [Case("W4", f"thresher @ {label}", "thresher", "thresher_loader", "restore", {"position": pos}),
                    Case("W4", f"thresher w2 @ {label}", "thresher", "thresher_loader", "restore",
                         {"position": pos, "workers": 2}, workers=2, default=False),
                    Case("W4", f"thresher w2 warm_start=True @ {label}", "thresher", "thresher_loader", "restore",
                         {"position": pos, "workers": 2, "warm_start": True}, workers=2, default=False),
                    Case("W4", f"grain @ {label}", "grain", "grain_loader", "restore", {"position": pos, "threads": 0}),
                    Case("W4", f"torch @ {label} (replay)", "torch", "torch_loader", "restore",
                         {"position": pos, "replay_cap": sizes["W4_replay_cap"] or 51_200})]
        return out
    if workload == "TTFB":
        # The W1 2-worker rows measure the same time (construction to first batch); when W1
        # runs, the report takes their TTFB and only the extra spawn row runs here.
        return [Case("TTFB", "thresher w2", "thresher", "thresher_loader", config={"workers": 2}, workers=2,
                     full_only=True),
                _g("TTFB", "grain w2 (default)", workers=2),
                _g("TTFB", "grain w2 (num_threads=0)", workers=2, default=False, threads=0),
                _p("TTFB", "torch w2 (fork)", workers=2),
                _p("TTFB", "torch w2 (spawn)", workers=2, default=False, context="spawn")]
    if workload == "W5":
        n, small = sizes["W5"], sizes["W5_torch"]
        return [Case("W5", "thresher sampler[p] x1000", "thresher", "thresher_loader", "sampler", {"num_records": n}),
                Case("W5", "thresher record_keys(arange(1000))", "thresher", "thresher_loader", "sampler",
                     {"num_records": n, "variant": "vectorised"}),
                Case("W5", "grain IndexSampler", "grain", "grain_loader", "sampler", {"num_records": n}),
                Case("W5", "torch RandomSampler", "torch", "torch_loader", "sampler",
                     {"num_records": n, "measure_at": small}),
                Case("W5", "bare numpy permutation", "bare", "bare_loader", "sampler",
                     {"num_records": n, "measure_at": small})]
    if workload == "W6":
        return [_t("W6", "thresher (pad map + Batch)", variant="pad_map"),
                _t("W6", "thresher (pad map + Batch, chunk_size=1024)", default=False, variant="pad_map",
                   chunk_size=1024),
                _t("W6", "thresher (Batch bytes + batch-level pad)", default=False, variant="pad_batch"),
                _t("W6", "thresher packing (Dataset.pack, best fit)", default=False, variant="pack"),
                _g("W6", "grain DataLoader pad (default)"),
                _g("W6", "grain DataLoader pad (num_threads=0)", default=False, threads=0),
                Case("W6", "grain FirstFitPack (default)", "grain", "grain_loader",
                     config={"variant": "pack"}, default=True),
                Case("W6", "grain FirstFitPack (num_threads=0)", "grain", "grain_loader",
                     config={"variant": "pack", "threads": 0}, default=False),
                _p("W6", "torch w0 (padding collate)"),
                _p("W6", "torch w0 (padding collate, __getitems__)", default=False, batched=True),
                _p("W6", "torch w0 (padding collate, read(i, i+1))", default=False, full_only=True, reads="range"),
                _b("W6", "bare (one read(keys) per batch)", reads="batch"),
                _b("W6", "bare (record by record, read(k, k+1))", reads="range")]
    raise ValueError(workload)
