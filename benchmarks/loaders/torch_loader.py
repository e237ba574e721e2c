"""PyTorch DataLoader pipelines (torch.utils.data, CPU).

Settings: map-style Datasets that open the ArrayRecord file lazily in the process
that reads (workers fork from a parent that never opened it: reading through a
reader inherited across fork crashes). ``batched=True`` adds ``__getitems__`` so
PyTorch's fetcher reads each batch with one ``ArrayRecordReader.read(keys)`` (its
best setting); otherwise ``__getitem__`` reads one record with ``read([i])`` (what
Grain's ArrayRecordDataSource does) or, with ``reads="range"``, ``read(i, i + 1)``
(array_record's much cheaper range read). Shuffle
with a seeded torch.Generator, ``drop_last=True``, the default collate (tensors,
shared memory from workers), ``multiprocessing_context`` as configured (default
fork). The per-record flip/crop rng is work.RecordRng seeded by the record index.
PyTorch has no iterator state: W4 replays.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Iterator

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, RandomSampler

from benchmarks import work

_OPTIONS = "readahead_buffer_size:0,max_parallelism:0"


class ArrayRecordDataset(Dataset):  # type: ignore[type-arg]
    def __init__(self, path: str, num_records: int, fn: Callable[[bytes, Any, int], Any],
                 reads: str = "list") -> None:
        self.path, self.num_records, self.fn, self.range_reads = path, num_records, fn, reads == "range"
        self._reader: Any = None
        self._rng: work.RecordRng | None = None

    def _open(self) -> Any:
        if self._reader is None:
            from array_record.python.array_record_module import ArrayRecordReader

            self._reader = ArrayRecordReader(self.path, _OPTIONS)
            self._rng = work.RecordRng()
        return self._reader

    def __len__(self) -> int:
        return self.num_records

    def __getitem__(self, index: int) -> Any:
        reader = self._open()
        record = reader.read(index, index + 1)[0] if self.range_reads else reader.read([index])[0]
        return self.fn(record, self._rng, index)


class BatchedArrayRecordDataset(ArrayRecordDataset):
    def __getitems__(self, indices: list[int]) -> list[Any]:
        records = self._open().read(list(indices))
        fn, rng = self.fn, self._rng
        return [fn(r, rng, i) for r, i in zip(records, indices)]


class W2Dataset(Dataset):  # type: ignore[type-arg]
    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> int:
        return work.w2_map(index)


def _w1(record: bytes, rng: work.RecordRng, index: int) -> Any:
    return work.w1_augment(work.w1_decode(record), rng.for_record(index))


def _w3(record: bytes, rng: work.RecordRng, index: int) -> Any:
    return work.w3_augment(work.w3_decode(record), rng.for_record(index))


def _w3_collate(batch: list[np.ndarray]) -> torch.Tensor:
    # default_collate would call torch.as_tensor on negative-stride (flipped) views and fail.
    return torch.from_numpy(np.stack(batch))


def _w8(record: bytes, rng: work.RecordRng, index: int) -> np.ndarray:
    return work.w8_augment(work.w8_decode(record), rng.for_record(index))


def _w8_reduced(record: bytes, rng: work.RecordRng, index: int) -> np.ndarray:
    return work.w8_reduced(record, rng.for_record(index))


def _w6(record: bytes, rng: work.RecordRng, index: int) -> np.ndarray:
    return work.w6_decode(record)


def _w6_collate(batch: list[np.ndarray]) -> torch.Tensor:
    return torch.from_numpy(work.w6_pad_batch(batch))


def _loader(workload: str, cfg: dict[str, Any], data: dict[str, Any]) -> DataLoader:  # type: ignore[type-arg]
    workers = int(cfg.get("workers", 0))
    cls0 = BatchedArrayRecordDataset if cfg.get("batched") else ArrayRecordDataset
    reads = cfg.get("reads", "list")

    def cls(path: str, n: int, fn: Any) -> ArrayRecordDataset:
        return cls0(path, n, fn, reads)

    collate: Any = None
    if workload in ("W2", "W2S"):  # W2S: RandomSampler (shuffle=True), the same map
        ds: Any = W2Dataset(data["num_records"])
        batch = work.W2_BATCH
    elif workload in ("W1", "W4", "TTFB"):
        ds, batch = cls(data["path"], data["num_records"], _w1), work.W1_BATCH
    elif workload == "W3":
        ds, batch, collate = cls(data["path"], data["num_records"], _w3), work.W3_BATCH, _w3_collate
    elif workload == "W6":
        ds, batch, collate = cls(data["path"], data["num_records"], _w6), work.W6_BATCH, _w6_collate
    elif workload == "W8":
        fn = _w8_reduced if cfg.get("variant") == "reduced" else _w8
        ds, batch, collate = cls(data["path"], data["num_records"], fn), work.W8_BATCH, _w3_collate
    else:
        raise ValueError(workload)
    kwargs: dict[str, Any] = {}
    if workers:
        kwargs["multiprocessing_context"] = cfg.get("context", "fork")
    return DataLoader(ds, batch_size=batch, shuffle=workload != "W2", num_workers=workers,
                      generator=torch.Generator().manual_seed(work.SEED), drop_last=workload not in ("W2", "W2S"),
                      collate_fn=collate, **kwargs)


def pipeline(workload: str, cfg: dict[str, Any], data: dict[str, Any]) -> tuple[Callable[[], Iterator[Any]], Callable[[Any], int]]:
    if workload in ("W1", "TTFB"):
        count: Callable[[Any], int] = lambda b: int(b["image"].shape[0])
    else:
        count = lambda b: int(b.shape[0])
    return (lambda: iter(_loader(workload, cfg, data))), count


def restore(cfg: dict[str, Any], data: dict[str, Any]) -> dict[str, Any]:
    """W4: PyTorch has no iterator state; resuming means replaying the batches before it.

    Replays up to ``cfg['replay_cap']`` records and extrapolates linearly beyond.
    """
    position = int(cfg["position"])
    cap = int(cfg.get("replay_cap") or position)
    skip = min(position, cap) // work.W1_BATCH
    t0 = time.perf_counter()
    it = iter(_loader("W4", cfg, data))
    for _ in range(skip):
        next(it)
    t_replay = time.perf_counter() - t0
    batch = next(it)
    dt = time.perf_counter() - t0
    replayed = skip * work.W1_BATCH
    out = {"records": int(batch["image"].shape[0]), "method": "replay"}
    if replayed >= position:
        out.update(restore_s=dt, extrapolated=False)
    else:
        rate = replayed / t_replay
        out.update(restore_s=position / rate + (dt - t_replay), extrapolated=True,
                   note=f"replayed {replayed} records at {rate:.0f}/s, extrapolated to {position}")
    return out


def sampler_first_indices(cfg: dict[str, Any]) -> dict[str, Any]:
    """W5: RandomSampler materialises randperm(n).tolist(); measured at a smaller n."""
    n = int(cfg["measure_at"])
    t0 = time.perf_counter()
    s = RandomSampler(range(n), generator=torch.Generator().manual_seed(work.SEED))
    it = iter(s)
    keys = [next(it) for _ in range(1000)]
    dt = time.perf_counter() - t0
    assert len(set(keys)) == 1000
    return {"first_1000_s": dt, "measured_at": n}
