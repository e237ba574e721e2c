"""Per-core images/s of thresher.vision's decode + random-resized crop, full vs reduced-scale decode.

    python -m benchmarks.vision_decode               # W8's JPEGs, 3 rounds

One process, no loader: the function alone on W8's records (ImageNet-sized JPEGs,
quality 90), per CPU second, for output sizes 224 (the ImageNet recipe) and 128 (the
low-resolution phase of progressive resizing), Pillow and OpenCV, ``reduced`` off and
on. The variants run interleaved; medians over rounds. Also the share of crops that
were decoded at 1/2 or less.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from benchmarks import cases, datasets


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.vision_decode", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--images", type=int, default=256)
    ap.add_argument("--cache", default="benchmarks/results/data")
    args = ap.parse_args(argv)
    from array_record.python.array_record_module import ArrayRecordReader

    from thresher.vision import _reduction, decode_random_resized_crop, open_jpeg, random_resized_crop_box

    data = datasets.ensure(args.cache, "jpeg", cases.FULL["W8"])
    records = ArrayRecordReader(data["path"]).read(list(range(args.images)))
    variants = [(size, backend, reduced) for size in (224, 128) for backend in ("pillow", "opencv")
                for reduced in (False, True)]
    rates: dict[tuple[int, str, bool], list[float]] = {v: [] for v in variants}
    for _ in range(args.rounds):
        for size, backend, reduced in variants:
            t = time.process_time()
            for i, r in enumerate(records):
                decode_random_resized_crop(r, np.random.default_rng(i), size, backend=backend, reduced=reduced)
            rates[(size, backend, reduced)].append(len(records) / (time.process_time() - t))
    print(f"images per CPU second, median of {args.rounds} rounds over {len(records)} W8 JPEGs (machine shared)")
    for size in (224, 128):
        reduced_share = np.mean([
            _reduction(*open_jpeg(r).size, *random_resized_crop_box(*open_jpeg(r).size,
                                                                   np.random.default_rng(i))[2:], size) > 1
            for i, r in enumerate(records)])
        for backend in ("pillow", "opencv"):
            full = statistics.median(rates[(size, backend, False)])
            red = statistics.median(rates[(size, backend, True)])
            print(f"  size {size}  {backend:<7} full decode {full:7.0f}/s   reduced {red:7.0f}/s   "
                  f"x{red / full:.2f}   (crops decoded at <= 1/2: {100 * reduced_share:.0f}%)")


if __name__ == "__main__":
    main()
