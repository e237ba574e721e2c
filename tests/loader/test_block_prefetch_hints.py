"""The loader tells a block-hinted source the window this process reads next (``prefetch_blocks``),
once per window and reader, and with shards only windows of its own shard."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import thresher as th


class Recording:
    """Records, and the hints the loader gives (from any thread)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.current: list[tuple[int, int]] = []
        self.next: list[list[tuple[int, int]]] = []
        self.read: set[int] = set()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, key: int) -> int:
        with self._lock:
            self.read.add(int(key))
        return int(key)

    def upcoming_blocks(self, starts: np.ndarray, stops: np.ndarray) -> None:
        with self._lock:
            self.current += list(zip(starts.tolist(), stops.tolist(), strict=True))

    def prefetch_blocks(self, starts: np.ndarray, stops: np.ndarray) -> None:
        with self._lock:
            self.next.append(list(zip(starts.tolist(), stops.tolist(), strict=True)))


@pytest.mark.parametrize(("workers", "shards"), [(0, 1), (2, 1), (0, 2), (2, 3)])
def test_the_next_window_of_this_process_is_prefetched(workers: int, shards: int) -> None:
    n = 8000
    shuffle = th.BlockShuffle(block_size=200, window_blocks=2)  # windows of 400 records: more than a read
    for shard in range(shards):
        src = Recording(n)
        sampler = th.IndexSampler(n, shuffle=shuffle, seed=3, num_epochs=1,
                                  shard_options=th.ShardOptions(shard, shards))
        got = [int(k) for b in th.DataLoader(src, sampler, [th.Batch(10)], worker_count=workers,
                                             worker_mode="thread") for k in b]
        local = sampler.local_length if sampler.local_length is not None else n
        assert sorted(got) == sorted(sampler.keys(sampler.to_global(np.arange(local))).tolist())
        windows = [tuple(w) for w in src.next]
        # each window once per reader (thread workers each read ahead; a source shares their fetches)
        assert max(windows.count(w) for w in windows) <= max(1, workers)
        assert src.next and src.current
        told = {k for w in src.next for a, b in w for k in range(a, b)}
        assert told <= src.read  # never a window this process does not read (another shard's)
        # every window this process reads after its first one was prefetched
        assert {k for a, b in src.current for k in range(a, b)} - told <= {
            k for a, b in src.current[:2] for k in range(a, b)}


@pytest.mark.parametrize("workers", [0, 2])
def test_every_window_a_read_spans_is_hinted(workers: int) -> None:
    """Windows shorter than one read of positions: each of the windows it spans is told, not only
    those of its first and last positions."""
    n = 3000
    src = Recording(n)
    sampler = th.IndexSampler(n, shuffle=th.BlockShuffle(block_size=10, window_blocks=3), seed=1, num_epochs=2)
    got = [int(k) for b in th.DataLoader(src, sampler, [th.Batch(200)], worker_count=workers,
                                         worker_mode="thread") for k in b]
    assert len(got) == 2 * n
    hinted = {k for a, b in src.current for k in range(a, b)}
    assert hinted == set(range(n))
