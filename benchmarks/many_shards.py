"""A shuffle over many local files: files kept open (or mapped) against the old limit of 256.

Writes ``--files`` TFRecord shards and as many ArrayRecord files of ``--records`` records of
``--record-bytes`` random bytes each (once, under ``--dir``), then reads ``--keys`` keys of a
global shuffle with ``__getitems__`` in batches of ``--batch``, one process, rounds interleaved,
medians of ``--repeats``:

- TFRecord with the default shard maps kept (a quarter of ``ulimit -n``, at most 4,096) and
  with 256 (the limit before 2026-11-27: most shards mapped again for every batch);
- ArrayRecord with the default ``max_open`` and with ``max_open=256``.

    python -m benchmarks.many_shards                     # 1,024 files of 200 records
    python -m benchmarks.many_shards --files 256         # as many files as the old limit: no difference
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import tempfile
import time
from collections.abc import Callable

import numpy as np


def _write(root: str, files: int, records: int, record_bytes: int) -> tuple[str, list[str]]:
    import thresher as th
    from thresher.sources.formats.tfrecord.framing import frame_record

    done = os.path.join(root, f"done-{files}-{records}-{record_bytes}")
    tf = [os.path.join(root, f"data.tfrecord-{i:05d}-of-{files:05d}") for i in range(files)]
    ar = [os.path.join(root, f"d-{i:05d}.array_record") for i in range(files)]
    if not os.path.exists(done):
        os.makedirs(root, exist_ok=True)
        rng = np.random.default_rng(0)
        for t, a in zip(tf, ar, strict=True):
            recs = [rng.bytes(record_bytes) for _ in range(records)]
            with open(t, "wb") as f:
                f.write(b"".join(frame_record(r) for r in recs))
            th.sources.write_array_record(a, recs)
        open(done, "w").close()
    return os.path.join(root, f"data.tfrecord-{{00000..{files - 1:05d}}}-of-{files:05d}"), ar


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=1024)
    ap.add_argument("--records", type=int, default=200)
    ap.add_argument("--record-bytes", type=int, default=100)
    ap.add_argument("--keys", type=int, default=50_000)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--dir", default=os.path.join(tempfile.gettempdir(), "thresher-many-shards"))
    a = ap.parse_args(argv)
    import thresher as th
    from thresher.sources.formats import shard_files
    from thresher.sources.formats.array_record.files import default_max_open

    pattern, ar_paths = _write(a.dir, a.files, a.records, a.record_bytes)
    keys = np.random.default_rng(1).permutation(a.files * a.records)[:a.keys]
    default_maps = shard_files.MAX_MAPS_KEPT

    def tfrecord(maps: int) -> Callable[[], None]:
        def run() -> None:
            shard_files.MAX_MAPS_KEPT = maps  # the module's cap: min(cap, a quarter of the limit) is kept
            try:
                src = th.sources.TFRecordSource(pattern)
                for i in range(0, len(keys), a.batch):
                    src.__getitems__(keys[i:i + a.batch])
            finally:
                shard_files.MAX_MAPS_KEPT = default_maps
        return run

    def array_record(max_open: int | None) -> Callable[[], None]:
        def run() -> None:
            src = th.sources.ArrayRecordSource(ar_paths, max_open=max_open)
            for i in range(0, len(keys), a.batch):
                src.__getitems__(keys[i:i + a.batch])
        return run

    rows = {
        f"TFRecord, maps kept: default ({shard_files.maps_kept()})": tfrecord(default_maps),
        "TFRecord, maps kept: 256": tfrecord(256),
        f"ArrayRecord, max_open: default ({default_max_open([a.records] * a.files)})": array_record(None),
        "ArrayRecord, max_open=256": array_record(256),
    }
    rates: dict[str, list[float]] = {k: [] for k in rows}
    for r in range(a.repeats):
        for name, fn in rows.items():
            t0 = time.perf_counter()
            fn()
            rates[name].append(len(keys) / (time.perf_counter() - t0))
            print(f"round {r}: {name:44s} {rates[name][-1]:12,.0f} records/s", flush=True)
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    print(f"\n{a.files:,} files of {a.records} records of {a.record_bytes} B, {a.keys:,} shuffled keys in batches "
          f"of {a.batch}, one process, ulimit -n {soft}, wall time, median of {a.repeats}")
    names = list(rows)
    for i, name in enumerate(names):
        med = statistics.median(rates[name])
        ratio = f"{med / statistics.median(rates[names[i + 1]]):.2f}x the 256 row" if i % 2 == 0 else ""
        print(f"{name:44s} {med:12,.0f} records/s  {ratio}")


if __name__ == "__main__":
    main()
