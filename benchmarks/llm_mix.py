"""W9, LLM pretraining input: a 3-source token mixture, packed to 2048, batches of 64 rows.

    python -m benchmarks.llm_mix                 # 3 rounds, ~6 s a run
    python -m benchmarks.llm_mix --rounds 5 --seconds 10

Data: three ArrayRecord files of tokenised documents (int32 tokens in [1, 32000)), with
long-tailed lengths (log-normal, median 400 tokens, clipped to 16..8,192), written
once under ``--cache``. Pipeline, the same in both libraries: each source shuffled and
repeated forever, decoded with ``np.frombuffer``, mixed with weights 0.6 / 0.3 / 0.1,
packed into rows of 2,048 tokens (documents longer than a row are truncated: both
packers do that), batched 64 rows at a time.

With ``--step-ms S`` the loop sleeps S ms after each batch (a training step), which is the
regime where ``next()`` latency matters: the workers work ahead while the step runs.

- thresher: ``Dataset.mix(...).pack(2048, truncate=True).batch(64)``, in process and
  with ``.prefetch(worker_count=2)``.
- Grain 0.2.x: ``MapDataset.mix`` -> ``to_iter_dataset`` -> ``BestFitPackIterDataset``
  (its best packer here: it packs tighter than ``FirstFitPackIterDataset``) with 64 bins
  -> ``batch(64)``, in process and with ``mp_prefetch`` (2 workers).

Measured per run (after 3 warm-up batches, for ``--seconds``): real tokens per second
(segment ids > 0) and per CPU second of this process (in-process rows: the per-core
figure), p50 / p99 latency of ``next()``, the padding fraction, and for thresher the
time from a fresh iterator + ``set_state`` to the next batch, at the step reached and at
a position 10**6 windows deep. The runs are interleaved (A B C D A B C D ...) in one
process, and the table shows medians over rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from typing import Any, Callable, Iterator

import numpy as np

SEQ_LEN, BATCH, WEIGHTS = 2048, 64, (0.6, 0.3, 0.1)
DOCS = (12_000, 6_000, 3_000)
MIN_LEN, MAX_LEN = 16, 8192


def ensure_sources(cache: str) -> list[str]:
    """Writes (once) the three token files; returns their paths."""
    from thresher.sources import write_array_record

    os.makedirs(cache, exist_ok=True)
    paths = []
    for j, n in enumerate(DOCS):
        path = os.path.join(os.path.abspath(cache), f"w9_tokens_{j}_{n}.array_record")
        if not os.path.exists(path):
            rng = np.random.default_rng(90 + j)
            lengths = np.clip(rng.lognormal(np.log(400), 1.1, size=n), MIN_LEN, MAX_LEN).astype(np.int64)
            tokens = rng.integers(1, 32_000, size=int(lengths.sum()), dtype=np.int32)
            ends = np.cumsum(lengths)
            records = (tokens[e - k:e].tobytes() for e, k in zip(ends.tolist(), lengths.tolist()))
            write_array_record(path + ".tmp", records, group_size=1)
            os.replace(path + ".tmp", path)
        paths.append(path)
    return paths


def decode(record: bytes) -> np.ndarray:
    return np.frombuffer(record, np.int32)


def thresher_dataset(paths: list[str], workers: int) -> Any:
    import thresher as th

    parts = [th.Dataset.source(th.sources.ArrayRecordSource(p)).map(decode).shuffle(seed=10 + j).repeat(None)
             for j, p in enumerate(paths)]
    ds = th.Dataset.mix(parts, list(WEIGHTS), seed=0).pack(SEQ_LEN, truncate=True).batch(BATCH, drop_remainder=True)
    return ds.prefetch(worker_count=workers) if workers else ds


def grain_iterator(paths: list[str], workers: int) -> Iterator[Any]:
    import grain
    import grain.python as pg
    from grain.experimental import BestFitPackIterDataset

    parts = [grain.MapDataset.source(pg.ArrayRecordDataSource(p)).shuffle(seed=10 + j).repeat()
             .map(lambda r: {"tokens": decode(r)[:SEQ_LEN]}) for j, p in enumerate(paths)]  # Grain needs it
    mixed = grain.MapDataset.mix(parts, list(WEIGHTS)).to_iter_dataset(pg.ReadOptions(num_threads=0))
    packed = BestFitPackIterDataset(mixed, length_struct={"tokens": SEQ_LEN}, num_packing_bins=BATCH,
                                    shuffle_bins=False).batch(BATCH, drop_remainder=True)
    if workers:
        from absl import flags

        if not flags.FLAGS.is_parsed():
            flags.FLAGS.mark_as_parsed()
        packed = packed.mp_prefetch(grain.MultiprocessingOptions(num_workers=workers))
    return iter(packed)


def _segments(batch: dict[str, Any]) -> np.ndarray:
    return np.asarray(batch["segment_ids"] if "segment_ids" in batch else batch["tokens_segment_ids"])


def measure(make: Callable[[], Iterator[Any]], seconds: float, step_s: float = 0.0) -> dict[str, Any]:
    it = make()
    t0 = time.perf_counter()
    for _ in range(3):
        next(it)
    warm = time.perf_counter() - t0
    lat: list[float] = []
    tokens = slots = 0
    c0, t_start = time.process_time(), time.perf_counter()
    while time.perf_counter() - t_start < seconds:
        a = time.perf_counter()
        batch = next(it)
        lat.append(time.perf_counter() - a)
        if step_s:
            time.sleep(step_s)  # a training step: the workers fill their buffers meanwhile
        seg = _segments(batch)
        tokens += int(np.count_nonzero(seg))
        slots += seg.size
    wall, cpu = (sum(lat) if not step_s else time.perf_counter() - t_start), time.process_time() - c0
    out = {"tokens_per_s": tokens / wall, "tokens_per_cpu_s": tokens / cpu, "batches": len(lat),
           "p50_ms": 1e3 * float(np.percentile(lat, 50)), "p99_ms": 1e3 * float(np.percentile(lat, 99)),
           "padding": 1 - tokens / slots, "warmup_s": warm, "it": it}
    return out


def thresher_restore(ds: Any, it: Any) -> dict[str, float]:
    """Fresh iterator + set_state -> next batch, at the step reached and 10**6 windows deeper."""
    from thresher.loader.state_types import LoaderState

    state = it.get_state()
    saved = LoaderState.from_json(state)  # a state 10**6 positions deeper, made (and signed) as a run makes it
    deep = LoaderState.at(saved.position + 10**6, saved.stream, saved.geometry, saved.operations,
                          extensions=saved.extensions).to_json()
    out = {}
    for label, st in (("restore_s", state), ("restore_deep_s", deep)):
        times, cpus = [], []
        for _ in range(3):
            t, c = time.perf_counter(), time.process_time()
            fresh = iter(ds)
            fresh.set_state(json.loads(json.dumps(st)))
            next(fresh)
            times.append(time.perf_counter() - t)
            cpus.append(time.process_time() - c)
            fresh.close()
        out[label] = statistics.median(times)
        out[label.replace("_s", "_cpu_s")] = statistics.median(cpus)
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.llm_mix", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=6.0)
    ap.add_argument("--step-ms", type=float, default=0.0,
                    help="sleep this long after each batch (a training step); 0 = throughput mode")
    ap.add_argument("--cache", default="benchmarks/results/data")
    ap.add_argument("--out", default="benchmarks/results/results_w9.json")
    args = ap.parse_args(argv)
    paths = ensure_sources(args.cache)
    configs: list[tuple[str, Callable[[], Iterator[Any]], Any]] = []
    for w in (0, 2):
        ds = thresher_dataset(paths, w)
        configs.append((f"thresher w{w}", (lambda ds=ds: iter(ds)), ds))
        configs.append((f"grain w{w} (BestFitPack)", (lambda w=w: grain_iterator(paths, w)), None))
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name, _, _ in configs}
    for r in range(args.rounds):
        for name, make, ds in configs:
            res = measure(make, args.seconds, args.step_ms / 1e3)
            it = res.pop("it")
            if ds is not None:
                res.update(thresher_restore(ds, it))
            close = getattr(it, "close", None)
            if close is not None:
                close()
            del it
            runs[name].append(res)
            print(f"  [{r + 1}/{args.rounds}] {name:<26} {res['tokens_per_s'] / 1e6:6.2f} M tok/s  "
                  f"{res['tokens_per_cpu_s'] / 1e6:6.2f} M tok/CPU-s  p50 {res['p50_ms']:7.2f} ms  "
                  f"p99 {res['p99_ms']:7.2f} ms  padding {100 * res['padding']:5.2f}%"
                  + (f"  restore {1e3 * res['restore_s']:.1f} ms (CPU {1e3 * res['restore_cpu_s']:.1f}; deep "
                     f"{1e3 * res['restore_deep_s']:.1f} ms, CPU {1e3 * res['restore_deep_cpu_s']:.1f})"
                     if "restore_s" in res else ""), flush=True)
    table = {name: {k: statistics.median(x[k] for x in rs) for k in rs[0]} for name, rs in runs.items()}
    print(f"\nW9 medians of {args.rounds} (machine shared: wall-clock figures are noisy; tok/CPU-s is the per-core "
          f"figure for w0 rows)")
    for name, m in table.items():
        print(f"  {name:<26} {m['tokens_per_s'] / 1e6:6.2f} M tok/s  {m['tokens_per_cpu_s'] / 1e6:6.2f} M tok/CPU-s  "
              f"p50 {m['p50_ms']:7.2f} ms  p99 {m['p99_ms']:7.2f} ms  padding {100 * m['padding']:5.2f}%"
              + (f"  restore {1e3 * m['restore_s']:.1f} ms (CPU {1e3 * m['restore_cpu_s']:.1f}), deep "
                 f"{1e3 * m['restore_deep_s']:.1f} ms (CPU {1e3 * m['restore_deep_cpu_s']:.1f})"
                 if "restore_s" in m else ""))
    for w in (0, 2):
        a, b = table[f"thresher w{w}"], table[f"grain w{w} (BestFitPack)"]
        print(f"  w{w}: thresher / Grain tokens/s {a['tokens_per_s'] / b['tokens_per_s']:.2f}x, "
              f"per CPU-s {a['tokens_per_cpu_s'] / b['tokens_per_cpu_s']:.2f}x")
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out + ".tmp", "w") as f:
        json.dump({"medians": table, "runs": runs, "rounds": args.rounds, "seconds": args.seconds,
                   "step_ms": args.step_ms}, f, indent=1)
    os.replace(args.out + ".tmp", args.out)
    print(f"results: {args.out}")


if __name__ == "__main__":
    main()
