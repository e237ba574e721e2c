"""Grain 0.2.x pipelines: ``grain.python.DataLoader`` (+ its Dataset API for packing).

Settings: ``threads`` None means Grain's default ReadOptions (16 read threads,
prefetch 500); ``threads=0`` reads in the consuming thread, which is Grain's best
setting on 2 cores. Same decode/augment functions as every other loader; the
per-record rng is the one Grain passes to RandomMapTransform.
"""

from __future__ import annotations

import json
import time
from typing import Any, Callable, Iterator

import grain.python as pg
import numpy as np

from benchmarks import work
from benchmarks.datasets import W6_MAX_LEN
from benchmarks.loaders import Unavailable


class W1Decode(pg.MapTransform):
    def map(self, element: Any) -> Any:
        return work.w1_decode(element)


class W1Augment(pg.RandomMapTransform):
    def random_map(self, element: Any, rng: np.random.Generator) -> Any:
        return work.w1_augment(element, rng)


class W2Map(pg.MapTransform):
    def map(self, element: Any) -> Any:
        return work.w2_map(element)


class W3Decode(pg.MapTransform):
    def map(self, element: Any) -> Any:
        return work.w3_decode(element)


class W3Augment(pg.RandomMapTransform):
    def random_map(self, element: Any, rng: np.random.Generator) -> Any:
        return work.w3_augment(element, rng)


class W6DecodePad(pg.MapTransform):
    def map(self, element: Any) -> Any:
        return work.w6_decode_pad(element)


class W8Decode(pg.MapTransform):
    def map(self, element: Any) -> Any:
        return work.w8_decode(element)


class W8Augment(pg.RandomMapTransform):
    def random_map(self, element: Any, rng: np.random.Generator) -> Any:
        return work.w8_augment(element, rng)


def _absl_flags() -> None:
    # Grain's worker processes read absl flags; a plain script must mark them parsed (grain #1355).
    from absl import flags

    if not flags.FLAGS.is_parsed():
        flags.FLAGS.mark_as_parsed()


def _read_options(cfg: dict[str, Any]) -> pg.ReadOptions | None:
    threads = cfg.get("threads")
    return None if threads is None else pg.ReadOptions(num_threads=int(threads))


def _loader(workload: str, cfg: dict[str, Any], data: dict[str, Any], num_epochs: int | None = 1) -> pg.DataLoader:
    workers = int(cfg.get("workers", 0))
    if workers:
        _absl_flags()
    if workload in ("W2", "W2S"):
        source: Any = pg.RangeDataSource(0, data["num_records"], 1)
        ops: list[Any] = [W2Map(), pg.Batch(work.W2_BATCH)]
    else:
        source = pg.ArrayRecordDataSource(data["path"])
        if workload in ("W1", "W4", "TTFB"):
            ops = [W1Decode(), W1Augment(), pg.Batch(work.W1_BATCH, drop_remainder=True)]
        elif workload == "W3":
            ops = [W3Decode(), W3Augment(), pg.Batch(work.W3_BATCH, drop_remainder=True)]
        elif workload == "W6":
            ops = [W6DecodePad(), pg.Batch(work.W6_BATCH, drop_remainder=True)]
        elif workload == "W8":
            ops = [W8Decode(), W8Augment(), pg.Batch(work.W8_BATCH, drop_remainder=True)]
        else:
            raise ValueError(workload)
    sampler = pg.IndexSampler(len(source), shard_options=pg.NoSharding(), shuffle=workload != "W2",
                              num_epochs=num_epochs, seed=work.SEED)
    return pg.DataLoader(data_source=source, sampler=sampler, operations=ops, worker_count=workers,
                         read_options=_read_options(cfg))


def _packing_iter(cfg: dict[str, Any], data: dict[str, Any]) -> Iterator[Any]:
    try:
        from grain.experimental import FirstFitPackIterDataset
    except ImportError as e:
        raise Unavailable(f"grain.experimental.FirstFitPackIterDataset: {e}") from e
    ds = (pg.MapDataset.source(pg.ArrayRecordDataSource(data["path"]))
          .shuffle(seed=work.SEED)
          .map(lambda r: {"tokens": work.w6_decode(r)}))
    read_options = _read_options(cfg) or pg.ReadOptions()
    packed = FirstFitPackIterDataset(ds.to_iter_dataset(read_options), length_struct={"tokens": W6_MAX_LEN},
                                     num_packing_bins=work.W6_BATCH, seed=work.SEED)
    return iter(packed.batch(work.W6_BATCH, drop_remainder=True))


def _count_packed(batch: Any) -> int:
    # Segment ids run 1..k in a row with k packed records (0 = padding).
    return int(batch["tokens_segment_ids"].max(axis=1).sum())


def pipeline(workload: str, cfg: dict[str, Any], data: dict[str, Any]) -> tuple[Callable[[], Iterator[Any]], Callable[[Any], int]]:
    if workload == "W6" and cfg.get("variant") == "pack":
        return (lambda: _packing_iter(cfg, data)), _count_packed
    if workload in ("W1", "TTFB"):
        count: Callable[[Any], int] = lambda b: int(b["image"].shape[0])
    else:
        count = lambda b: int(b.shape[0])
    return (lambda: iter(_loader(workload, cfg, data))), count


def restore(cfg: dict[str, Any], data: dict[str, Any]) -> dict[str, Any]:
    """W4: a fresh DataLoader + set_state (Grain's own checkpoint) -> its next batch."""
    position = int(cfg["position"])
    epochs = None if position >= data["num_records"] else 1
    it0 = iter(_loader("W4", cfg, data, epochs))
    next(it0)
    state = json.loads(it0.get_state().decode())
    # With worker_count=0 and no sharding, last_seen_indices["0"] is the last record index
    # handed out; after one batch of 128 it is 127.
    assert state["last_seen_indices"]["0"] == work.W1_BATCH - 1, state
    state["last_seen_indices"]["0"] = position - 1
    saved = json.dumps(state).encode()
    del it0

    def once() -> tuple[float, int]:
        t0 = time.perf_counter()
        it = iter(_loader("W4", cfg, data, epochs))
        it.set_state(saved)
        batch = next(it)
        dt = time.perf_counter() - t0
        after = json.loads(it.get_state().decode())["last_seen_indices"]["0"]
        assert after == position + work.W1_BATCH - 1, (after, position)
        return dt, int(batch["image"].shape[0])

    runs = [once() for _ in range(5)]
    ts = sorted(t for t, _ in runs)
    return {"restore_s": ts[2], "restore_cold_s": runs[0][0], "restore_all_s": [t for t, _ in runs],
            "records": runs[0][1], "method": "set_state"}


def sampler_first_indices(cfg: dict[str, Any]) -> dict[str, Any]:
    n = int(cfg["num_records"])
    t0 = time.perf_counter()
    s = pg.IndexSampler(n, shard_options=pg.NoSharding(), shuffle=True, num_epochs=1, seed=work.SEED)
    keys = [s[i].record_key for i in range(1000)]
    dt = time.perf_counter() - t0
    assert len(set(keys)) == 1000
    return {"first_1000_s": dt, "measured_at": n}
