"""Data and pipelines for the worker tests.

Worker processes import this module (functions defined here are pickled by
reference), so it imports nothing but numpy and thresher: never pytest or hypothesis.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from typing import Any

import numpy as np

import thresher as th

SIDE = 32  # a decoded image is 32x32 float32 = 4 KiB: big enough to travel through shared memory
RECORD_BYTES = SIDE * SIDE + 8
N_RECORDS = 200  # in the session's records_path file


def record(i: int) -> bytes:
    rng = np.random.default_rng(i)
    image = rng.integers(0, 256, size=(SIDE, SIDE), dtype=np.uint8)
    return image.tobytes() + np.int64(i).tobytes()


def write_records(path: str, keys: range) -> str:
    th.sources.write_array_record(path, (record(i) for i in keys))
    return path


def decode(rec: bytes) -> dict[str, Any]:
    image = np.frombuffer(rec, np.uint8, SIDE * SIDE).reshape(SIDE, SIDE)
    label = np.frombuffer(rec, np.int64, 1, SIDE * SIDE)[0]
    return {"image": image.astype(np.float32) / 255.0, "label": label}


def flip(x: dict[str, Any], rng: np.random.Generator) -> dict[str, Any]:
    if rng.random() < 0.5:
        x = {"image": x["image"][:, ::-1], "label": x["label"]}
    return {"image": x["image"] + rng.random(dtype=np.float32), "label": x["label"]}


def keep(x: dict[str, Any]) -> bool:
    return int(x["label"]) % 3 != 0


def label_sum(batch: dict[str, Any]) -> dict[str, Any]:
    return {**batch, "label_sum": np.asarray(batch["label"]).sum()}


def slow(x: Any) -> Any:
    time.sleep(0.002)
    return x


class FailOn(th.MapTransform):
    """Raises ValueError on one record (by label)."""

    def __init__(self, label: int) -> None:
        self.label = label

    def map(self, x: dict[str, Any]) -> dict[str, Any]:
        if int(x["label"]) == self.label:
            raise ValueError(f"cannot handle label {self.label}")
        return x


class ExitOn(th.MapTransform):
    """Ends the process with os._exit(3) on one record: what a crashing extension does."""

    def __init__(self, label: int, how: str = "exit") -> None:
        self.label, self.how = label, how

    def map(self, x: dict[str, Any]) -> dict[str, Any]:
        if int(x["label"]) == self.label:
            if self.how == "exit":
                os._exit(3)
            elif self.how == "segfault":
                import ctypes

                ctypes.string_at(0)
            elif self.how == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
        return x


def with_lock(x: dict[str, Any]) -> dict[str, Any]:
    return {**x, "lock": threading.Lock()}


def build(paths: Any, *, n: int | None = None, shuffle: bool = False, seed: int = 0,
          num_epochs: int | None = 1, shards: tuple[int, int] = (0, 1), shard_drop: bool = False,
          batch: int | None = 8, drop_remainder: bool = False, filter: bool = False,
          random_map: bool = False, batch_op: bool = False, extra: tuple[Any, ...] = (),
          workers: int = 0, chunk_size: int | None = 64, buffer: int = 2, threads: int | None = None,
          prefetch: int = 500, warm_start: bool = False, mode: str | None = None) -> th.DataLoader:
    """A DataLoader over ArrayRecord ``paths``; every option of the equivalence tests.

    ``threads``/``prefetch``: the ReadOptions (reads in flight per producer); ``mode``:
    the worker mode (``"process"``, ``"thread"``, or None: the default).

    Chunks of 64 positions by default, so that the small test datasets are cut into
    enough chunks to keep every worker busy (pass None for the loader's default).
    """
    source = th.sources.ArrayRecordSource(paths)
    sampler = th.IndexSampler(len(source) if n is None else n, shuffle=shuffle, seed=seed,
                              num_epochs=num_epochs,
                              shard_options=th.ShardOptions(shards[0], shards[1], drop_remainder=shard_drop))
    ops: list[Any] = [decode, *extra]
    if random_map:
        ops.append(th.RandomMapTransform(flip))
    if filter:
        ops.append(th.FilterTransform(keep))
    if batch is not None:
        ops.append(th.Batch(batch, drop_remainder=drop_remainder))
        if batch_op:
            ops.append(label_sum)
    return th.DataLoader(source, sampler, ops, worker_count=workers, worker_mode=mode,
                         chunk_size=chunk_size,
                         worker_buffer_size=buffer, warm_start=warm_start,
                         read_options=th.ReadOptions(num_threads=threads, prefetch_buffer_size=prefetch))


def assert_same(a: Any, b: Any, where: str = "") -> None:
    """Bit-identical pytrees (same structure, dtypes, shapes, bytes)."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), where
        for k in a:
            assert_same(a[k], b[k], f"{where}[{k!r}]")
        return
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape, f"{where}: {a.dtype}{a.shape} vs {b.dtype}{b.shape}"
    assert a.tobytes() == b.tobytes(), f"{where}: values differ"


def run(loader: th.DataLoader, limit: int | None = None) -> tuple[list[Any], list[dict[str, Any]]]:
    """(batches, the state after each batch), at most ``limit`` batches."""
    out, states = [], []
    with iter(loader) as it:
        for batch in it:
            out.append(batch)
            states.append(it.get_state())
            if limit is not None and len(out) >= limit:
                break
    return out, states


def assert_all_same(expected: list[Any], got: list[Any], where: str = "") -> None:
    assert len(got) == len(expected), f"{where}: {len(got)} batches, expected {len(expected)}"
    for i, (a, b) in enumerate(zip(expected, got)):
        assert_same(a, b, f"{where} batch {i}")


def checkpoint(loader: th.DataLoader, k: int) -> dict[str, Any]:
    """The state after ``k`` batches (the iterator is closed)."""
    with iter(loader) as it:
        for _ in range(k):
            next(it)
        return it.get_state()


class OddShapeOn(th.MapTransform):
    """Gives one record (by label) an image of another shape: its batch cannot be stacked."""

    def __init__(self, label: int) -> None:
        self.label = label

    def map(self, x: dict[str, Any]) -> dict[str, Any]:
        if int(x["label"]) == self.label:
            return {"image": x["image"][:-1], "label": x["label"]}
        return x


class Waiting:
    """A source with only ``__getitem__`` whose every read waits ``wait_s`` (time.sleep: waits
    overlap, as on a network filesystem); key ``fail_on`` raises a SourceError naming it."""

    def __init__(self, n: int, wait_s: float = 0.0, fail_on: int | None = None,
                 suggested: int | None = None) -> None:
        self.n, self.wait_s, self.fail_on = n, wait_s, fail_on
        if suggested is not None:
            self.suggested_reads_in_flight = suggested

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, key: int) -> bytes:
        if self.wait_s:
            time.sleep(self.wait_s)
        if key == self.fail_on:
            raise th.errors.SourceError(f"remote.db: record {key} cannot be read")
        return np.arange(key, key + 4, dtype=np.int64).tobytes()

    def __repr__(self) -> str:
        return f"Waiting({self.n})"


def from_bytes(rec: bytes) -> np.ndarray:
    return np.frombuffer(rec, np.int64) * 3


def spin(x: Any) -> Any:
    """About 0.3 ms of pure-Python work that holds the interpreter lock (no GIL released)."""
    total = 0
    for i in range(3000):
        total += i * i
    return x if total >= 0 else None


class Unpicklable:
    """A source that refuses to be pickled: only thread workers (and worker_count=0) can read it."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.lock = threading.Lock()

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, key: int) -> int:
        with self.lock:
            return key * 10

    def __reduce__(self) -> Any:
        raise TypeError("Unpicklable cannot be pickled")
