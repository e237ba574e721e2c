"""Does the DirectRunner deliver every element of a GroupByKey? A check with no thresher code.

The pipeline has the shape of ``thresher.beam.WriteDataset(exchange="runner")``: elements
with a uniform 64-bit hash and 790 bytes of payload are put in 65,536 buckets by the hash's
leading 16 bits, a CombineGlobally counts them per bucket (a side input), each element goes
to the shard(s) its bucket overlaps, a GroupByKey groups them by shard, and a DoFn counts
what each group holds per bucket. Every bucket that reaches a group must be there whole
(the routing depends on the bucket only), so a short bucket is an element that the runner
lost, or a key whose values it split between two groups.

    python -m benchmarks.beam_gbk_check --n 400000 --shards 16 --repeats 5

Each run prints one JSON line: groups, keys, keys that came in more than one group, and
short buckets (shard, bucket, got, counted), in one group and summed over a key's groups.
The exit status is 1 when any run was short. On this machine (2 cores) short runs showed
up only while other pipelines loaded it (run two or three of these at once).
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import os
import sys
import tempfile
from collections.abc import Iterator
from typing import Any

BUCKETS = 1 << 16
CHUNK = 5_000


def _chunk(c: int, n: int) -> Iterator[tuple[bytes, bytes]]:
    for i in range(c * CHUNK, min((c + 1) * CHUNK, n)):
        yield hashlib.blake2b(str(i).encode(), digest_size=8).digest() + str(i).encode(), bytes(790)


def _bucket(kv: tuple[bytes, bytes]) -> tuple[int, bytes, bytes]:
    return int.from_bytes(kv[0][:2], "big"), kv[0], kv[1]


def _count() -> Any:
    import apache_beam as beam

    class Count(beam.CombineFn):  # per-bucket counts -> prefix sums
        def create_accumulator(self) -> list[int]:
            return [0] * BUCKETS

        def add_input(self, acc: list[int], r: tuple[int, bytes, bytes]) -> list[int]:
            acc[r[0]] += 1
            return acc

        def merge_accumulators(self, accs: Any) -> list[int]:
            out = [0] * BUCKETS
            for a in accs:
                for i, c in enumerate(a):
                    out[i] += c
            return out

        def extract_output(self, acc: list[int]) -> list[int]:
            starts = [0]
            for c in acc:
                starts.append(starts[-1] + c)
            return starts

    return Count()


def _route(r: tuple[int, bytes, bytes], starts: list[int], shards: int) -> Iterator[tuple[int, Any]]:
    n, lo, hi = starts[-1], starts[r[0]], starts[r[0] + 1]
    for s in range(lo * shards // n, (hi - 1) * shards // n + 1):
        yield s, r


def _held(item: tuple[int, Any]) -> Iterator[tuple[int, dict[int, int]]]:
    shard, values = item
    yield shard, dict(collections.Counter(b for b, _, _ in values))


def _verdict(groups: list[tuple[int, dict[int, int]]], starts: list[int], path: str) -> None:
    calls = collections.Counter(s for s, _ in groups)
    merged: dict[int, collections.Counter[int]] = collections.defaultdict(collections.Counter)
    for s, got in groups:
        merged[s].update(got)

    def short(pairs: Any) -> list[tuple[int, int, int, int]]:
        return [(s, b, c, starts[b + 1] - starts[b]) for s, got in pairs for b, c in got.items()
                if c != starts[b + 1] - starts[b]]

    one, summed = short(groups), short(merged.items())
    with open(path, "w") as f:
        json.dump({"groups": len(groups), "keys": len(calls),
                   "keys_in_more_than_one_group": sorted(k for k, v in calls.items() if v > 1),
                   "short_in_one_group": len(one), "first_short": one[:3],
                   "short_summed_over_groups": len(summed)}, f)


def run_once(n: int, shards: int, path: str) -> dict[str, Any]:
    """One pipeline on the DirectRunner with 2 worker processes; its verdict."""
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions

    opts = PipelineOptions(flags=[], direct_num_workers=2, direct_running_mode="multi_processing")
    with beam.Pipeline("DirectRunner", options=opts) as p:
        b = p | beam.Create(range(-(-n // CHUNK))) | beam.FlatMap(_chunk, n) | beam.Map(_bucket)
        plan = beam.pvalue.AsSingleton(b | beam.CombineGlobally(_count()))
        _ = (b | beam.FlatMap(_route, plan, shards) | beam.GroupByKey() | beam.FlatMap(_held)
             | beam.combiners.ToList() | beam.Map(_verdict, plan, path))
    with open(path) as f:
        out: dict[str, Any] = json.load(f)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=400_000)
    ap.add_argument("--shards", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeats):
            v = run_once(args.n, args.shards, os.path.join(tmp, f"verdict{i}.json"))
            bad += bool(v["short_in_one_group"])
            print(json.dumps(v), flush=True)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
