"""Cost of the feature layer: decoding 28x28 uint8 images + int64 labels (W1's records).

Compares, per record:

1. hand-written ``np.frombuffer`` decode of raw records (784 image bytes + 8 label bytes):
   ``{"image": frombuffer(r, uint8, 784).reshape(28, 28, 1), "label": frombuffer(r, int64, 1, 784)[0]}``
2. the best hand-written decode we know (one ``np.ndarray`` view per field, no reshape);
3. thresher's ``RecordCodec.decode`` of the same examples written with
   ``{"image": Image((28, 28, 1), encoding="none"), "label": ClassLabel(num_classes=10)}``;
4. end to end through the files: ``ArrayRecordSource.__getitems__`` + (1) versus
   ``thresher.data_source(...).__getitems__`` for batches of random keys.

The variants run interleaved, several rounds; the minimum over rounds is reported (the
least disturbed measurement on a shared machine).

    python benchmarks/features_decode.py [--records 20000] [--rounds 15]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import thresher as th  # noqa: E402
from thresher.features import ClassLabel, Image, RecordCodec  # noqa: E402
from thresher.sources import ArrayRecordSource, write_array_record  # noqa: E402

U8, I8 = np.dtype(np.uint8), np.dtype("<i8")


def hand_frombuffer(records):
    fb = np.frombuffer
    return [{"image": fb(r, U8, 784, 0).reshape(28, 28, 1), "label": fb(r, I8, 1, 784)[0]}
            for r in records]


def hand_ndarray(records):
    nd = np.ndarray
    return [{"image": nd((28, 28, 1), U8, r, 0), "label": nd((), I8, r, 784)[()]}
            for r in records]


def timed(fn, arg, repeat):
    t0 = time.perf_counter()
    for _ in range(repeat):
        fn(arg)
    return time.perf_counter() - t0


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--records", type=int, default=20000)
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--batch", type=int, default=256)
    args = p.parse_args(argv)
    n = args.records
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (n, 28, 28, 1), dtype=np.uint8)
    labels = rng.integers(0, 10, n)
    features = {"image": Image((28, 28, 1), encoding="none"), "label": ClassLabel(num_classes=10)}
    codec = RecordCodec(features)
    ours = [codec.encode({"image": images[i], "label": labels[i]}) for i in range(n)]
    raw = [images[i].tobytes() + int(labels[i]).to_bytes(8, "little") for i in range(n)]
    assert all(np.array_equal(a["image"], b["image"]) and a["label"] == b["label"]
               for a, b in zip(hand_frombuffer(raw[:100]), codec.decode_many(ours[:100])))

    with tempfile.TemporaryDirectory() as d:
        raw_path = os.path.join(d, "raw.array_record")
        write_array_record(raw_path, raw)
        th.prepare(os.path.join(d, "w1"), {"train": {"image": images, "label": labels}},
                   features=features, num_shards=1, progress=False)
        raw_src = ArrayRecordSource(raw_path)
        our_src = th.data_source(os.path.join(d, "w1"), split="train")
        batches = [rng.integers(0, n, args.batch) for _ in range(max(1, n // args.batch))]

        def raw_e2e(bs):
            for b in bs:
                hand_frombuffer(raw_src.__getitems__(b))

        def our_e2e(bs):
            for b in bs:
                our_src.__getitems__(b)

        variants = {
            "1 hand-written frombuffer+reshape": (hand_frombuffer, raw, n),
            "2 hand-written np.ndarray views": (hand_ndarray, raw, n),
            "3 thresher RecordCodec.decode_many": (codec.decode_many, ours, n),
            "4a files: ArrayRecordSource + (1)": (raw_e2e, batches, len(batches) * args.batch),
            "4b files: thresher.data_source": (our_e2e, batches, len(batches) * args.batch),
        }
        best = {k: float("inf") for k in variants}
        for _ in range(args.rounds):
            for name, (fn, arg, count) in variants.items():
                best[name] = min(best[name], timed(fn, arg, 1) / count)

    print(f"{n} records of 28x28x1 uint8 + int64 label, best of {args.rounds} rounds")
    for name, t in best.items():
        print(f"  {name:<40} {t * 1e9:8.0f} ns/record")
    ref = best["1 hand-written frombuffer+reshape"]
    for name, base in (("vs (1)", ref), ("vs (2)", best["2 hand-written np.ndarray views"])):
        over = best["3 thresher RecordCodec.decode_many"] / base - 1
        print(f"  feature layer overhead {name}: {over * 100:+.1f}%")
    e2e = best["4b files: thresher.data_source"] / best["4a files: ArrayRecordSource + (1)"] - 1
    print(f"  end-to-end overhead through files (4b vs 4a): {e2e * 100:+.1f}%")


if __name__ == "__main__":
    main()
