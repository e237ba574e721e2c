"""thresher pipelines for every workload (the same functions as the peers run)."""

from __future__ import annotations

import time
from typing import Any, Callable, Iterator

import numpy as np

import thresher as th
from benchmarks import work
from benchmarks.datasets import W6_MAX_LEN
from benchmarks.loaders import Unavailable


def _count_w1(batch: Any) -> int:
    return int(batch["image"].shape[0])


def _count_array(batch: Any) -> int:
    return int(batch.shape[0])


def w6_pad_bytes_batch(raw: np.ndarray) -> np.ndarray:
    """A batch of raw token records, stacked by Batch as a zero-padded bytes array -> (B, 512) int32.

    ``Batch`` stacks bytes into a fixed-width ``S<max>`` array whose padding is zero bytes,
    which is exactly int32 padding with 0: one C-level copy instead of a pad per record.
    """
    width = raw.dtype.itemsize // 4
    tokens = np.frombuffer(raw.tobytes(), np.int32).reshape(len(raw), width)
    out = np.zeros((len(raw), W6_MAX_LEN), np.int32)
    out[:, :width] = tokens
    return out


def _loader(workload: str, cfg: dict[str, Any], data: dict[str, Any], num_epochs: int | None = 1) -> th.DataLoader:
    shuffle = workload != "W2" and cfg.get("shuffle", True)
    if workload in ("W2", "W2S"):
        source: Any = th.sources.RangeDataSource(0, data["num_records"])
        ops: list[Any] = [work.w2_map, th.Batch(work.W2_BATCH)]
    else:
        source = th.sources.ArrayRecordSource(data["path"])
        if workload in ("W1", "W4", "TTFB"):
            ops = [work.w1_decode, th.RandomMapTransform(work.w1_augment), th.Batch(work.W1_BATCH, drop_remainder=True)]
        elif workload == "W3":
            ops = [work.w3_decode, th.RandomMapTransform(work.w3_augment), th.Batch(work.W3_BATCH, drop_remainder=True)]
        elif workload == "W8":
            ops = ([th.RandomMapTransform(work.w8_reduced)] if cfg.get("variant") == "reduced"
                   else [work.w8_decode, th.RandomMapTransform(work.w8_augment)])
            ops.append(th.Batch(work.W8_BATCH, drop_remainder=True))
        elif workload == "W6":
            variant = cfg.get("variant", "pad_map")
            if variant == "pad_map":
                ops = [work.w6_decode_pad, th.Batch(work.W6_BATCH, drop_remainder=True)]
            elif variant == "pad_batch":
                ops = [th.Batch(work.W6_BATCH, drop_remainder=True), w6_pad_bytes_batch]
            elif variant == "pack":
                raise ValueError("the packing variant is built by _packed_dataset, not as a DataLoader")
            else:
                raise ValueError(variant)
        else:
            raise ValueError(workload)
    sampler = th.IndexSampler(len(source), shuffle=shuffle,
                              seed=work.SEED, num_epochs=num_epochs)
    warm = {"warm_start": cfg["warm_start"]} if "warm_start" in cfg else {}  # else the DataLoader's default
    return th.DataLoader(source, sampler, ops, worker_count=cfg.get("workers", 0), chunk_size=cfg.get("chunk_size"),
                         worker_mode=cfg.get("mode"), **warm)


def _iterate(loader: th.DataLoader) -> Iterator[Any]:
    try:
        return iter(loader)
    except ModuleNotFoundError as e:  # worker_count > 0 before thresher.loader.pool.workers exists
        if (e.name or "").startswith("thresher"):
            raise Unavailable(f"worker_count={loader.worker_count}: {e}") from e
        raise
    except NotImplementedError as e:
        raise Unavailable(str(e)) from e


def _packed_dataset(data: dict[str, Any]) -> Any:
    """W6 packing: thresher.Dataset's best-fit packing into rows of 512, batches of 64 rows."""
    source = th.sources.ArrayRecordSource(data["path"])
    return (th.Dataset.source(source).shuffle(work.SEED).map(work.w6_decode)
            .pack(W6_MAX_LEN).batch(work.W6_BATCH, drop_remainder=True))


def _count_packed(batch: Any) -> int:
    # Segment ids run 1..k in a row holding k records (0 = padding).
    return int(batch["segment_ids"].max(axis=1).sum())


def import_now() -> None:
    """Imports what the first DataLoader would import on first use.

    ``import thresher`` is lazy: the DataLoader's modules are imported the first time
    ``th.DataLoader`` is looked up. ``torch_loader``'s ``import torch`` imports
    ``torch.utils.data`` at once. Benchmarks that leave imports out of their clock
    (``benchmarks.epoch_time``) call this before starting it, so both sides start with
    their loader imported.
    """
    _ = th.DataLoader, th.sources.ArrayRecordSource, th.Batch, th.RandomMapTransform


def pipeline(workload: str, cfg: dict[str, Any], data: dict[str, Any]) -> tuple[Callable[[], Iterator[Any]], Callable[[Any], int]]:
    if workload == "W6" and cfg.get("variant") == "pack":
        return (lambda: iter(_packed_dataset(data))), _count_packed
    count = _count_w1 if workload in ("W1", "TTFB") else _count_array

    def factory() -> Iterator[Any]:
        return _iterate(_loader(workload, cfg, data))

    return factory, count


def restore(cfg: dict[str, Any], data: dict[str, Any]) -> dict[str, Any]:
    """W4: a fresh DataLoader + set_state at ``cfg['position']`` -> its next batch."""
    position = int(cfg["position"])
    endless = position >= data["num_records"]
    epochs = None if endless else 1
    # The state an iterator of this pipeline saves at ``position`` (states are signed: the loader
    # makes it, as a run that got there would have; editing a saved state's position is refused).
    state = _loader("W4", cfg, data, epochs).state_at(position).to_json()

    def once() -> tuple[float, int]:
        t0 = time.perf_counter()
        it = _iterate(_loader("W4", cfg, data, epochs))
        it.set_state(state)
        batch = next(it)
        dt = time.perf_counter() - t0
        it.close()
        return dt, _count_w1(batch)

    return restore_result(once, "set_state (O(1))")


def restore_result(once: Callable[[], tuple[float, int]], method: str, times: int = 5) -> dict[str, Any]:
    """Runs a restore ``times`` times (each a fresh loader): the first is cold, the median is reported."""
    runs = [once() for _ in range(times)]
    ts = sorted(t for t, _ in runs)
    return {"restore_s": ts[len(ts) // 2], "restore_cold_s": runs[0][0], "restore_all_s": [t for t, _ in runs],
            "records": runs[0][1], "method": method}


def sampler_first_indices(cfg: dict[str, Any]) -> dict[str, Any]:
    """W5: an IndexSampler over 10**9 records; the first 1,000 indices."""
    n = int(cfg["num_records"])
    t0 = time.perf_counter()
    s = th.IndexSampler(n, shuffle=True, seed=work.SEED)
    if cfg.get("variant") == "vectorised":
        keys = s.record_keys(np.arange(1000, dtype=np.int64))[0].tolist()
    else:
        keys = [s[p].record_key for p in range(1000)]
    dt = time.perf_counter() - t0
    assert len(set(keys)) == 1000
    return {"first_1000_s": dt, "measured_at": n}
