"""Image folders, WebDataset shards and TFRecord files read in place (issue 27), against their peers.

    python -m benchmarks.in_place_formats                       # all three, 3 rounds
    python -m benchmarks.in_place_formats --only tfrecord --rounds 5

Variants run interleaved within each round; the figures are medians over rounds, the ratios
are of medians from the same run. The machine is shared with other work: say so with the figures.

- image_folder: W8's JPEGs (ImageNet-sized, quality 90) written as a folder of 10 class
  subfolders (default 1,536 images, scaled down from the issue's 20k to fit this machine).
  thresher: ImageFolderSource, global shuffle, W8's decode (Pillow, full size) + random-resized
  crop 224 + flip, Batch(256); a second row with thresher.vision's reduced-scale decode.
  Peer: a torchvision-style ImageFolder (torchvision's ordering rules and its loader: read the
  file, decode with Pillow) + the PyTorch DataLoader (shuffle, batch 256, default collate)
  running the same functions. torchvision itself is not installable here. Workers 0 and 2,
  and 2 with ``warm_start=True`` (the first chunks computed while the workers start).
- webdataset: shards of W8 JPEG + .cls samples (default 16 shards of 96 samples, about 3 MB
  each: scaled down from the issue's 64 x 100 MB). thresher: WebDatasetSource, a global
  shuffle of the epoch, the W8 decode, Batch(256); peer: the webdataset library's
  shard-shuffle + shuffle(buffer 1000) pipeline with the same decode, batched(256), through
  the PyTorch DataLoader (its documented way to use workers). Workers 0 and 2 (and 2 with
  ``warm_start=True``). Also the
  index build cost (all shards, no cache) in seconds per GB.
- tfrecord: one set of TFRecord files (default 4 x 25,000 records of 1 KiB). Index build
  (one pass checking every CRC, no cache) in MB/s; a shuffled epoch of random access
  (__getitems__ of 256 shuffled keys at a time, every CRC checked) against a sequential read
  of the same files with the bare framing loop (``read_records``, CRCs checked), records/s.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tarfile
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from benchmarks import datasets, work

BATCH = 256


# ---- image folder -------------------------------------------------------------------------

def _write_folder(root: str, n: int) -> None:
    for i, jpeg in enumerate(datasets._jpeg_records(n)):
        d = os.path.join(root, f"class_{i % 10:02d}")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, f"img_{i:06d}.JPEG"), "wb") as f:
            f.write(jpeg)


def _w8_image(record: dict[str, Any]) -> Any:
    return work.w8_decode(record["image"])


def _w8_reduced_image(record: dict[str, Any], rng: np.random.Generator) -> np.ndarray:
    return work.w8_reduced(record["image"], rng)


def _thresher_folder(root: str, workers: int, reduced: bool, warm: bool = False) -> int:
    import thresher as th

    src = th.sources.ImageFolderSource(root)
    ops: list[Any] = ([th.RandomMapTransform(_w8_reduced_image)] if reduced else
                      [_w8_image, th.RandomMapTransform(work.w8_augment)])
    loader = th.DataLoader(src, th.IndexSampler(len(src), shuffle=True, seed=0, num_epochs=1),
                           [*ops, th.Batch(BATCH, drop_remainder=True)], worker_count=workers, warm_start=warm)
    return sum(len(b) for b in loader)


class _TorchImageFolder:
    """torchvision's ImageFolder as its documentation states it: sorted class folders, samples
    sorted by (class, folder, name), each read and decoded by the loader function."""

    def __init__(self, root: str) -> None:
        from thresher.sources.formats.image_folder import scan_folder  # the same rules, written once

        listing = scan_folder(root)
        self.samples = [(os.path.join(root, f), label) for f, label in zip(listing.files, listing.labels,
                                                                          strict=True)]
        self._rng: work.RecordRng | None = None

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: int) -> tuple[np.ndarray, int]:
        if self._rng is None:
            self._rng = work.RecordRng()
        path, label = self.samples[index]
        with open(path, "rb") as f:
            img = work.w8_decode(f.read())
        return work.w8_augment(img, self._rng.for_record(index)), label


def _collate(batch: list[tuple[np.ndarray, int]]) -> tuple[Any, Any]:
    """np.stack (the flips are negative-stride views, which default_collate refuses), as tensors."""
    import torch

    return torch.from_numpy(work.w8_stack([b[0] for b in batch])), torch.tensor([b[1] for b in batch])


def _torch_folder(root: str, workers: int) -> int:
    import torch
    from torch.utils.data import DataLoader

    ds = _TorchImageFolder(root)
    g = torch.Generator().manual_seed(0)
    loader = DataLoader(ds, batch_size=BATCH, shuffle=True, generator=g, num_workers=workers,  # type: ignore[arg-type]
                        drop_last=True, collate_fn=_collate, multiprocessing_context="fork" if workers else None)
    return sum(len(b[0]) for b in loader)


# ---- webdataset ---------------------------------------------------------------------------

def _write_shards(root: str, shards: int, per_shard: int) -> list[str]:
    jpegs = datasets._jpeg_records(shards * per_shard)
    urls = []
    for s in range(shards):
        path = os.path.join(root, f"shard-{s:06d}.tar")
        with tarfile.open(path, "w") as tar:
            for i in range(per_shard):
                key = f"{s:06d}{i:05d}"
                for ext, data in (("jpg", next(jpegs)), ("cls", str(i % 10).encode())):
                    info = tarfile.TarInfo(f"{key}.{ext}")
                    info.size = len(data)
                    tar.addfile(info, _Bytes(data))
        urls.append(path)
    return urls


class _Bytes:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def read(self, n: int = -1) -> bytes:
        out = self.data[self.pos:] if n < 0 else self.data[self.pos:self.pos + n]
        self.pos += len(out)
        return out


def _w8_sample(sample: dict[str, Any]) -> Any:
    return work.w8_decode(sample["jpg"])


def _thresher_wds(pattern: str, workers: int, warm: bool = False) -> int:
    import thresher as th

    src = th.sources.WebDatasetSource(pattern)
    loader = th.DataLoader(src, th.IndexSampler(len(src), shuffle=True, seed=0, num_epochs=1),
                           [_w8_sample, th.RandomMapTransform(work.w8_augment), th.Batch(BATCH, drop_remainder=True)],
                           worker_count=workers, warm_start=warm)
    return sum(len(b) for b in loader)


class _WdsAugment:
    def __init__(self) -> None:
        self._rng: work.RecordRng | None = None
        self._i = 0

    def __call__(self, sample: dict[str, Any]) -> np.ndarray:
        if self._rng is None:
            self._rng = work.RecordRng()
        self._i += 1
        return work.w8_augment(work.w8_decode(sample["jpg"]), self._rng.for_record(self._i))


def _wds_library(urls: list[str], workers: int) -> int:
    import webdataset as wds
    from torch.utils.data import DataLoader

    ds = (wds.WebDataset(urls, shardshuffle=len(urls), seed=0, empty_check=False)
          .shuffle(1000).map(_WdsAugment()).batched(BATCH, partial=False, collation_fn=work.w8_stack))
    loader = DataLoader(ds, batch_size=None, num_workers=workers,
                        multiprocessing_context="fork" if workers else None)
    return sum(len(b) for b in loader)


def _index_build(pattern: str, nbytes: int) -> float:
    """Seconds per GB to build every shard's index (caches removed first)."""
    import thresher as th

    _drop_indexes(os.path.dirname(pattern))
    t = time.perf_counter()
    th.sources.WebDatasetSource(pattern)
    return (time.perf_counter() - t) / (nbytes / 1e9)


def _drop_indexes(folder: str) -> None:
    shutil.rmtree(os.path.join(folder, ".thresher-index"), ignore_errors=True)


# ---- tfrecord -----------------------------------------------------------------------------

def _write_tfrecords(root: str, files: int, per_file: int, size: int) -> list[str]:
    from thresher.sources.formats.tfrecord.framing import frame_record

    rng = np.random.default_rng(0)
    paths = []
    for f in range(files):
        path = os.path.join(root, f"data.tfrecord-{f:05d}-of-{files:05d}")
        with open(path, "wb") as out:
            for _ in range(per_file):
                out.write(frame_record(rng.integers(0, 255, size, dtype=np.uint8).tobytes()))
        paths.append(path)
    return paths


def _tfrecord_sequential(paths: list[str]) -> int:
    from thresher.sources.formats.tfrecord.framing import read_records

    n = 0
    for p in paths:
        with open(p, "rb") as f:
            for _ in read_records(f, p):
                n += 1
    return n


def _tfrecord_random(pattern: str) -> int:
    import thresher as th

    src = th.sources.TFRecordSource(pattern)
    keys = np.random.default_rng(0).permutation(len(src))
    n = 0
    for lo in range(0, len(keys), BATCH):
        n += len(src.__getitems__(keys[lo:lo + BATCH]))
    return n


def _tfrecord_index(pattern: str) -> int:
    import thresher as th

    _drop_indexes(os.path.dirname(pattern))
    return len(th.sources.TFRecordSource(pattern))


# ---- harness ------------------------------------------------------------------------------

def _ratio(a: float, b: float) -> str:
    return f"x{a / b:.2f}" if b else "x-"


def _rounds(variants: dict[str, Callable[[], int]], rounds: int) -> dict[str, float]:
    """Items per second of each variant, median over rounds (variants interleaved)."""
    rates: dict[str, list[float]] = {k: [] for k in variants}
    for _ in range(rounds):
        for name, fn in variants.items():
            t = time.perf_counter()
            n = fn()
            rates[name].append(n / (time.perf_counter() - t))
    return {k: statistics.median(v) for k, v in rates.items()}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.in_place_formats", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default="image_folder,webdataset,tfrecord")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--images", type=int, default=1536)
    ap.add_argument("--shards", type=int, default=16)
    ap.add_argument("--per-shard", type=int, default=96)
    ap.add_argument("--tfrecords", type=int, default=25_000, help="records per file (4 files, 1 KiB each)")
    args = ap.parse_args(argv)
    only = set(args.only.split(","))
    tmp = tempfile.mkdtemp(prefix="thresher-in-place-")
    os.environ.setdefault("THRESHER_CACHE_DIR", os.path.join(tmp, "cache"))
    print(f"medians of {args.rounds} rounds; the machine is shared with other work (timings are noisy); "
          f"load average at start {os.getloadavg()[0]:.1f}")
    try:
        if "image_folder" in only:
            root = os.path.join(tmp, "folder")
            _write_folder(root, args.images)
            variants: dict[str, Callable[[], int]]
            variants = {f"{name} w{w}": (lambda fn=fn, w=w: fn(root, w)) for w in (0, 2) for name, fn in [
                ("thresher", lambda root, w: _thresher_folder(root, w, False)),
                ("thresher-reduced", lambda root, w: _thresher_folder(root, w, True)),
                ("torch-imagefolder", _torch_folder)]}
            variants["thresher-warm w2"] = lambda: _thresher_folder(root, 2, False, warm=True)
            r = _rounds(variants, args.rounds)
            print(f"image folder, {args.images} W8 JPEGs, images/s:")
            for w in (0, 2):
                base = r[f"torch-imagefolder w{w}"]
                print(f"  workers {w}: torch ImageFolder+DataLoader {base:7.0f}   thresher {r[f'thresher w{w}']:7.0f} "
                      f"({_ratio(r[f'thresher w{w}'], base)})   thresher reduced decode "
                      f"{r[f'thresher-reduced w{w}']:7.0f} ({_ratio(r[f'thresher-reduced w{w}'], base)})")
            print(f"  workers 2, warm_start=True: thresher {r['thresher-warm w2']:7.0f} "
                  f"({_ratio(r['thresher-warm w2'], r['torch-imagefolder w2'])})")
        if "webdataset" in only:
            root = os.path.join(tmp, "wds")
            os.makedirs(root)
            urls = _write_shards(root, args.shards, args.per_shard)
            pattern = os.path.join(root, f"shard-{{000000..{args.shards - 1:06d}}}.tar")
            nbytes = sum(os.path.getsize(u) for u in urls)
            builds = [_index_build(pattern, nbytes) for _ in range(args.rounds)]
            variants = {f"{name} w{w}": (lambda fn=fn, w=w: fn(w)) for w in (0, 2) for name, fn in [
                ("thresher", lambda w: _thresher_wds(pattern, w)), ("webdataset", lambda w: _wds_library(urls, w))]}
            variants["thresher-warm w2"] = lambda: _thresher_wds(pattern, 2, warm=True)
            r = _rounds(variants, args.rounds)
            print(f"webdataset, {args.shards} shards x {args.per_shard} samples ({nbytes / 1e6:.0f} MB), "
                  f"samples/s of a shuffled epoch:")
            for w in (0, 2):
                base = r[f"webdataset w{w}"]
                print(f"  workers {w}: webdataset shard shuffle + buffer {base:7.0f}   thresher global shuffle "
                      f"{r[f'thresher w{w}']:7.0f} ({_ratio(r[f'thresher w{w}'], base)})")
            print(f"  workers 2, warm_start=True: thresher {r['thresher-warm w2']:7.0f} "
                  f"({_ratio(r['thresher-warm w2'], r['webdataset w2'])})")
            print(f"  index build: {statistics.median(builds):.2f} s per GB (all shards, no cache)")
        if "tfrecord" in only:
            root = os.path.join(tmp, "tfr")
            os.makedirs(root)
            paths = _write_tfrecords(root, 4, args.tfrecords, 1024)
            pattern = os.path.join(root, "data.tfrecord-*")
            mb = sum(os.path.getsize(p) for p in paths) / 1e6
            _tfrecord_index(pattern)
            r = _rounds({"sequential": lambda: _tfrecord_sequential(paths),
                         "random": lambda: _tfrecord_random(pattern),
                         "index": lambda: _tfrecord_index(pattern)}, args.rounds)
            n = 4 * args.tfrecords
            print(f"tfrecord, 4 files x {args.tfrecords} records of 1 KiB ({mb:.0f} MB), records/s:")
            print(f"  sequential framing loop {r['sequential']:9.0f}   shuffled random access {r['random']:9.0f} "
                  f"({_ratio(r['random'], r['sequential'])})")
            print(f"  index build (every CRC checked, no cache): {r['index'] * mb / n:.0f} MB/s")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
