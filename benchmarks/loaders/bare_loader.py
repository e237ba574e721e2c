"""Bare loops: the same reads and numpy work with no framework (the machine's limit).

``reads="record"`` reads one record per ``read([k])`` call (as Grain's ArrayRecordDataSource
and a plain ``__getitem__`` do); ``reads="range"`` one record per ``read(k, k + 1)`` call
(array_record's range read: ~3 us a record where ``read([k])`` costs 100+ us at 60k
records); ``reads="batch"`` each batch with one ``ArrayRecordReader.read(keys)`` call.
The shuffle is a numpy permutation, the per-record rng work.RecordRng, batches are
stacked with np.stack. For the 2-worker rows the report doubles these figures
("2x bare"): two such loops on two cores are the most two workers could do.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Iterator

import numpy as np

from benchmarks import work

_OPTIONS = "readahead_buffer_size:0,max_parallelism:0"


def _reader(path: str) -> Any:
    from array_record.python.array_record_module import ArrayRecordReader

    return ArrayRecordReader(path, _OPTIONS)


def _batches(n: int, batch: int, shuffle: bool = True, drop_remainder: bool = True) -> Iterator[list[int]]:
    order = np.random.default_rng(work.SEED).permutation(n) if shuffle else np.arange(n)
    for start in range(0, n - batch + 1 if drop_remainder else n, batch):
        yield order[start:start + batch].tolist()


def _read_fn(reader: Any, reads: str) -> Callable[[list[int]], list[bytes]]:
    if reads == "batch":
        return reader.read  # type: ignore[no-any-return]
    read = reader.read
    if reads == "range":
        return lambda keys: [read(k, k + 1)[0] for k in keys]
    return lambda keys: [read([k])[0] for k in keys]


def _w1(data: dict[str, Any], reads: str) -> Iterator[Any]:
    read = _read_fn(_reader(data["path"]), reads)
    rng = work.RecordRng()
    for keys in _batches(data["num_records"], work.W1_BATCH):
        elements = [work.w1_augment(work.w1_decode(r), rng.for_record(k)) for r, k in zip(read(keys), keys)]
        yield {"image": np.stack([e["image"] for e in elements]),
               "label": np.array([e["label"] for e in elements])}


def _w2(data: dict[str, Any], reads: str, shuffle: bool = False) -> Iterator[Any]:
    for keys in _batches(data["num_records"], work.W2_BATCH, shuffle=shuffle, drop_remainder=False):
        yield np.asarray([work.w2_map(k) for k in keys])


def _w2s(data: dict[str, Any], reads: str) -> Iterator[Any]:
    return _w2(data, reads, shuffle=True)


def _w3(data: dict[str, Any], reads: str) -> Iterator[Any]:
    read = _read_fn(_reader(data["path"]), reads)
    rng = work.RecordRng()
    for keys in _batches(data["num_records"], work.W3_BATCH):
        yield np.stack([work.w3_augment(work.w3_decode(r), rng.for_record(k)) for r, k in zip(read(keys), keys)])


def _w6(data: dict[str, Any], reads: str) -> Iterator[Any]:
    read = _read_fn(_reader(data["path"]), reads)
    for keys in _batches(data["num_records"], work.W6_BATCH):
        yield work.w6_pad_batch([work.w6_decode(r) for r in read(keys)])


def _w8(data: dict[str, Any], reads: str, variant: str | None = None) -> Iterator[Any]:
    read = _read_fn(_reader(data["path"]), reads)
    rng = work.RecordRng()
    for keys in _batches(data["num_records"], work.W8_BATCH):
        if variant == "reduced":
            yield np.stack([work.w8_reduced(r, rng.for_record(k)) for r, k in zip(read(keys), keys)])
        else:
            yield np.stack([work.w8_augment(work.w8_decode(r), rng.for_record(k)) for r, k in zip(read(keys), keys)])


_LOOPS = {"W1": _w1, "W2": _w2, "W2S": _w2s, "W3": _w3, "W6": _w6, "W8": _w8}


def pipeline(workload: str, cfg: dict[str, Any], data: dict[str, Any]) -> tuple[Callable[[], Iterator[Any]], Callable[[Any], int]]:
    loop = _LOOPS[workload]
    reads = cfg.get("reads", "batch")
    if workload == "W1":
        count: Callable[[Any], int] = lambda b: int(b["image"].shape[0])
    else:
        count = lambda b: int(b.shape[0])
    if workload == "W8":
        return (lambda: _w8(data, reads, cfg.get("variant"))), count
    return (lambda: loop(data, reads)), count


def sampler_first_indices(cfg: dict[str, Any]) -> dict[str, Any]:
    """W5 reference: a materialised numpy permutation (what an O(N) shuffle costs)."""
    n = int(cfg["measure_at"])
    t0 = time.perf_counter()
    keys = np.random.default_rng(work.SEED).permutation(n)[:1000].tolist()
    dt = time.perf_counter() - t0
    assert len(set(keys)) == 1000
    return {"first_1000_s": dt, "measured_at": n}
