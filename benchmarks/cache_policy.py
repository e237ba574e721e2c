"""How often a chunk is fetched per epoch under a chunk cache: LRU against Belady's optimum.

A simulation, no I/O: ``--chunks`` chunks of ``--group`` records each, read in shuffled
order for two epochs, through a cache of a fraction of the chunks. LRU is what the
byte-range reader does (thresher/sources/remote/chunk_cache.py); Belady's policy evicts
the chunk whose next use is farthest, which a reader could do only if it were told the
keys of future batches (the sampler is a pure function of position, so they are known).
The last columns are thresher's ChunkCache itself, read 128 keys at a time as the loader
reads a chunk of positions: with no window (LRU), then told the chunks of the next
``--windows`` reads (``RemoteReadOptions.lookahead``): Belady's policy within that window.

    python -m benchmarks.cache_policy
"""

from __future__ import annotations

import argparse
import collections
import heapq

import numpy as np


def lru_fetches(order: list[int], slots: int) -> int:
    """Fetches of an LRU cache of ``slots`` chunks reading ``order``."""
    held: collections.OrderedDict[int, None] = collections.OrderedDict()
    fetches = 0
    for c in order:
        if c in held:
            held.move_to_end(c)
            continue
        fetches += 1
        held[c] = None
        if len(held) > slots:
            held.popitem(last=False)
    return fetches


def belady_fetches(order: list[int], slots: int) -> int:
    """Fetches of a cache of ``slots`` chunks that evicts the chunk used farthest ahead."""
    n = len(order)
    following = [n] * n
    seen: dict[int, int] = {}
    for i in range(n - 1, -1, -1):
        following[i] = seen.get(order[i], n)
        seen[order[i]] = i
    held: dict[int, int] = {}  # chunk -> its next use
    heap: list[tuple[int, int]] = []  # (-next use, chunk); stale entries skipped
    fetches = 0
    for i, c in enumerate(order):
        if c not in held:
            fetches += 1
            if len(held) >= slots:
                while True:
                    far, victim = heapq.heappop(heap)
                    if held.get(victim) == -far:
                        del held[victim]
                        break
        held[c] = following[i]
        heapq.heappush(heap, (-following[i], c))
    return fetches


def window_fetches(order: list[int], slots: int, window: int, every: int = 128) -> int:
    """Fetches of thresher's ChunkCache of ``slots`` chunks reading ``order`` as the loader
    does: ``every`` reads at a time (one batched read: each distinct chunk claimed once),
    after telling the cache the ``window`` chunk uses that follow them (0: plain LRU)."""
    from thresher.sources.remote.chunk_cache import ChunkCache

    cache = ChunkCache(budget=8 * slots)  # a decoded chunk of no bytes and one bound costs 8
    chunks = np.asarray(order, dtype=np.int64)
    for i in range(0, len(order), every):
        ahead = chunks[i + every:i + every + window]
        cache.upcoming(np.zeros_like(ahead), ahead)
        for key in cache.claim(dict.fromkeys((0, c) for c in order[i:i + every]))[2]:
            cache.fulfil(key, ([0], b""))
    return cache.misses


def main(argv: list[str] | None = None) -> list[tuple[float, float, float]]:
    """Prints fetches per chunk per epoch for each budget; returns (budget, lru, belady) rows."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--chunks", type=int, default=300)
    ap.add_argument("--group", type=int, default=64)
    ap.add_argument("--budgets", default="0.1,0.25,0.5,1.0", help="cache sizes, fractions of the chunks")
    ap.add_argument("--windows", default="2048,8192",
                    help="look-ahead windows (records) of thresher's ChunkCache, told every 128 records")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    records = args.chunks * args.group
    order = np.concatenate([rng.permutation(records), rng.permutation(records)]) // args.group
    epochs = 2 * args.chunks
    rows = []
    print(f"{args.chunks} chunks of {args.group} records, 2 shuffled epochs; fetches per chunk per epoch "
          f"(no cache: {args.group})")
    windows = [0] + [int(w) for w in args.windows.split(",") if w]
    print(f"{'cache':>8}{'LRU':>8}{'Belady':>8}" + "".join(f"{f'window {w}' if w else 'batched LRU':>14}" for w in windows))
    for budget in (float(b) for b in args.budgets.split(",")):
        slots = max(1, round(budget * args.chunks))
        lru = lru_fetches(order.tolist(), slots) / epochs
        best = belady_fetches(order.tolist(), slots) / epochs
        rows.append((budget, lru, best))
        near = [window_fetches(order.tolist(), slots, w) / epochs for w in windows]
        print(f"{budget:>8.0%}{lru:>8.1f}{best:>8.1f}" + "".join(f"{x:>14.1f}" for x in near))
    return rows


if __name__ == "__main__":
    main()
