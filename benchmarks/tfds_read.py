"""Reading a TFDS-written MNIST-like dataset: thresher against ``tfds.data_source``.

The dataset (60,000 28x28x1 PNG images + ClassLabel, array_record, 4 shards) is written
by tensorflow-datasets itself, which needs TensorFlow to encode images, so make it once in
a separate environment (it is not committed)::

    python3 -m venv /tmp/tfds-gen && /tmp/tfds-gen/bin/pip install tensorflow-cpu \\
        tensorflow-datasets array_record
    /tmp/tfds-gen/bin/python benchmarks/tfds_read.py make /tmp/mnist_like

Then, in thresher's environment (the test extra has tensorflow-datasets, which reads
array_record datasets without TensorFlow, and Grain)::

    python benchmarks/tfds_read.py run /tmp/mnist_like/mnist_like [--records 20000] [--repeats 3]

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


def make(path: str, n: int = 60_000) -> None:
    import tensorflow_datasets as tfds

    class MnistLike(tfds.core.GeneratorBasedBuilder):
        """28x28 grey PNG digits-like images with a label."""

        VERSION = tfds.core.Version("3.0.1")

        def _info(self) -> Any:
            return tfds.core.DatasetInfo(builder=self, features=tfds.features.FeaturesDict({
                "image": tfds.features.Image(shape=(28, 28, 1)),
                "label": tfds.features.ClassLabel(num_classes=10)}),
                supervised_keys=("image", "label"))

        def _split_generators(self, dl_manager: Any) -> Any:
            return {"train": self._generate_examples(n)}

        def _generate_examples(self, count: int) -> Any:
            rng = np.random.default_rng(0)
            yy, xx = np.mgrid[:28, :28]
            for i in range(count):
                label = int(rng.integers(0, 10))
                # a blob whose place depends on the label, plus noise: compresses like digits
                cy, cx = 8 + 2 * (label % 5), 8 + 3 * (label // 5)
                img = 255 * np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / 30.0)
                img = img + rng.normal(0, 20, img.shape)
                img = np.clip(img, 0, 255).astype(np.uint8)
                yield i, {"image": img[:, :, None], "label": label}

    builder = MnistLike(data_dir=path, file_format="array_record")
    builder.download_and_prepare(download_config=tfds.download.DownloadConfig(num_shards=4))
    print(f"written: {builder.data_dir}", file=sys.stderr)


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


def run(path: str, records: int, repeats: int) -> None:
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
        a, b = ours[k], theirs[k]
        assert a["label"] == b["label"] and np.array_equal(a["image"], b["image"])
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
    r = sub.add_parser("run", help="compare thresher and tfds.data_source on it")
    r.add_argument("path", help="the directory given to make (or its version directory)")
    r.add_argument("--records", type=int, default=20_000)
    r.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    if args.cmd == "make":
        make(args.path, args.records)
    else:
        run(args.path, args.records, args.repeats)


if __name__ == "__main__":
    main()
