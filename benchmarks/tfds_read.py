"""Reading a TFDS-written MNIST-like dataset: thresher against ``tfds.data_source``.

The dataset (60,000 28x28x1 PNG images + ClassLabel, array_record, 4 shards) is written
by tensorflow-datasets itself, which needs TensorFlow to encode images, so make it once in
a separate environment (it is not committed)::

    python3 -m venv /tmp/tfds-gen && /tmp/tfds-gen/bin/pip install tensorflow-cpu \\
        tensorflow-datasets array_record
    /tmp/tfds-gen/bin/python benchmarks/tfds_read.py make /tmp/mnist_like
    /tmp/tfds-gen/bin/python benchmarks/tfds_read.py make /tmp/like --kind cifar --records 20000
    /tmp/tfds-gen/bin/python benchmarks/tfds_read.py make /tmp/like --kind tabular --records 20000

Then, in thresher's environment (the test extra has tensorflow-datasets, which reads
array_record datasets without TensorFlow, and Grain)::

    python benchmarks/tfds_read.py run /tmp/mnist_like/mnist_like [--records 20000] [--repeats 3]
    python benchmarks/tfds_read.py run /tmp/like/cifar_like --no-workers

Rows (records/s with decode; medians of ``--repeats``; ratios against TFDS in the same run):

- in process: ``source.__getitems__`` on batches of 128 shuffled keys; thresher's
  ``data_source`` vs ``tfds.data_source`` (both decode PNG with OpenCV when installed),
  reading the same batches alternately; the ratio is the median of per-batch ratios;
- 2 workers: thresher's ``DataLoader(worker_count=2)`` over its source vs Grain's
  ``DataLoader(worker_count=2)`` over TFDS's source (how TFDS documents multi-worker
  reading of ``tfds.data_source``), both shuffled with Batch(128).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Any, Callable

import numpy as np

BATCH = 128


KINDS = ("mnist", "cifar", "tabular")


def _features(tfds: Any, kind: str) -> Any:
    f = tfds.features
    if kind == "mnist":
        return f.FeaturesDict({"image": f.Image(shape=(28, 28, 1)), "label": f.ClassLabel(num_classes=10)})
    if kind == "cifar":
        return f.FeaturesDict({"id": f.Text(), "image": f.Image(shape=(32, 32, 3)),
                               "label": f.ClassLabel(num_classes=10)})
    return f.FeaturesDict({"dense": f.Tensor(shape=(32,), dtype=np.float32),
                           "ids": f.Tensor(shape=(16,), dtype=np.int64),
                           "mask": f.Tensor(shape=(4,), dtype=np.bool_),
                           "label": f.ClassLabel(num_classes=10)})


def _example(kind: str, i: int, rng: np.random.Generator) -> dict[str, Any]:
    label = int(rng.integers(0, 10))
    if kind == "tabular":
        return {"dense": rng.normal(size=32).astype(np.float32),
                "ids": rng.integers(0, 2**40, 16), "mask": rng.random(4) < 0.5, "label": label}
    side, channels = (28, 1) if kind == "mnist" else (32, 3)
    yy, xx = np.mgrid[:side, :side]
    # a blob whose place depends on the label, plus noise: compresses like digits
    cy, cx = 8 + 2 * (label % 5), 8 + 3 * (label // 5)
    img = 255 * np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / 30.0)
    img = img[:, :, None] + rng.normal(0, 20, (side, side, channels))
    img = np.clip(img, 0, 255).astype(np.uint8)
    out = {"image": img, "label": label}
    if kind == "cifar":
        out["id"] = f"train_{i:05d}"
    return out


def make(path: str, n: int = 60_000, kind: str = "mnist") -> None:
    """Writes ``<path>/<kind>_like/3.0.1`` with tensorflow-datasets (images need TensorFlow)."""
    import tensorflow_datasets as tfds

    class Like(tfds.core.GeneratorBasedBuilder):
        """A dataset shaped like MNIST, CIFAR-10 or a small tabular one."""

        VERSION = tfds.core.Version("3.0.1")
        name = f"{kind}_like"

        def _info(self) -> Any:
            keys = None if kind == "tabular" else ("image", "label")
            return tfds.core.DatasetInfo(builder=self, features=_features(tfds, kind),
                                         supervised_keys=keys)

        def _split_generators(self, dl_manager: Any) -> Any:
            return {"train": self._generate_examples(n)}

        def _generate_examples(self, count: int) -> Any:
            rng = np.random.default_rng(0)
            for i in range(count):
                yield i, _example(kind, i, rng)

    builder = Like(data_dir=path, file_format="array_record")
    builder.download_and_prepare(download_config=tfds.download.DownloadConfig(num_shards=4))
    print(f"written: {builder.data_dir}", file=sys.stderr)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return bool(np.array_equal(a, b)) and np.asarray(a).dtype == np.asarray(b).dtype
    return type(a) is type(b) and a == b


def _rate(fn: Callable[[], int]) -> float:
    t = time.perf_counter()
    n = fn()
    return n / (time.perf_counter() - t)


def _paired(ours: Callable[[], int], theirs: Callable[[], int],
            repeats: int) -> tuple[float, float, float]:
    """Median rates of both, run alternately, and the median of the paired ratios (the
    machine is shared: pairing keeps load changes out of the ratio)."""
    a, b = [], []
    for _ in range(repeats):
        a.append(_rate(ours))
        b.append(_rate(theirs))
    return (statistics.median(a), statistics.median(b),
            statistics.median(x / y for x, y in zip(a, b)))


def _in_process(ours: Any, theirs: Any, keys: np.ndarray) -> tuple[float, float, float]:
    """Both sources read the same batches alternately, batch by batch; returns their
    rates and the median of the per-batch ratios (robust to a shared machine's load)."""
    spent = [0.0, 0.0]
    ratios = []
    for lo in range(0, len(keys), BATCH):
        batch = keys[lo:lo + BATCH].tolist()
        took = []
        for i, source in enumerate((ours, theirs)):
            t = time.perf_counter()
            source.__getitems__(batch)
            took.append(time.perf_counter() - t)
            spent[i] += took[-1]
        ratios.append(took[1] / took[0])
    return len(keys) / spent[0], len(keys) / spent[1], statistics.median(ratios)


def _drain(loader: Any, records: int) -> int:
    n = 0
    for batch in loader:
        n += len(batch["label"])
        if n >= records:
            break
    return n


def run(path: str, records: int, repeats: int, workers: bool = True) -> None:
    import grain.python as grain
    import tensorflow_datasets as tfds

    import thresher as th

    ours = th.data_source(path, split="train")
    theirs = tfds.builder_from_directory(th.builder(path).data_dir).as_data_source(
        split="train")  # what tfds.data_source returns for this directory
    assert len(ours) == len(theirs)
    records = min(records, len(ours))
    keys = np.random.default_rng(0).permutation(len(ours))[:records]
    for k in keys[:50].tolist():  # the same values
        assert _same(ours[k], theirs[k]), k
    _in_process(ours, theirs, keys[:1000])  # warm the page cache and the decoders
    runs = [_in_process(ours, theirs, keys) for _ in range(repeats)]
    rows = [("in process",) + tuple(statistics.median(r[i] for r in runs) for i in range(3))]

    def thresher_workers() -> int:
        loader = th.DataLoader(ours, th.IndexSampler(len(ours), shuffle=True, seed=0,
                                                     num_epochs=1),
                               [th.Batch(BATCH)], worker_count=2)
        return _drain(loader, records)

    from absl import flags

    if not flags.FLAGS.is_parsed():  # Grain's workers read absl flags (grain #1355)
        flags.FLAGS.mark_as_parsed()

    def grain_workers() -> int:
        sampler = grain.IndexSampler(len(theirs), grain.NoSharding(), shuffle=True, seed=0,
                                     num_epochs=1)
        loader = grain.DataLoader(data_source=theirs, sampler=sampler,
                                  operations=[grain.Batch(BATCH)], worker_count=2)
        return _drain(loader, records)

    if workers:
        rows.append(("2 workers",) + _paired(thresher_workers, grain_workers, repeats))
    print(f"{records} records, {repeats} repeats (median), batch {BATCH}")
    print(f"{'':12} {'thresher rec/s':>16} {'tfds rec/s':>12} {'ratio':>7}")
    for name, a, b, ratio in rows:
        print(f"{name:12} {a:16,.0f} {b:12,.0f} {ratio:7.2f}x")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make", help="write the dataset (needs TensorFlow + tensorflow-datasets)")
    m.add_argument("path")
    m.add_argument("--records", type=int, default=60_000)
    m.add_argument("--kind", choices=KINDS, default="mnist",
                   help="mnist: 28x28x1 PNG + label; cifar: 32x32x3 PNG + text id + label; "
                        "tabular: float32 (32,), int64 (16,), bool (4,) tensors + label")
    r = sub.add_parser("run", help="compare thresher and tfds.data_source on it")
    r.add_argument("path", help="the directory given to make (or its version directory)")
    r.add_argument("--records", type=int, default=20_000)
    r.add_argument("--repeats", type=int, default=3)
    r.add_argument("--no-workers", action="store_true", help="only the in-process row")
    args = p.parse_args()
    if args.cmd == "make":
        make(args.path, args.records, args.kind)
    else:
        run(args.path, args.records, args.repeats, not args.no_workers)


if __name__ == "__main__":
    main()
