"""Does the DirectRunner deliver every element of a GroupByKey? A check with no thresher code.

The pipeline has the shape of ``thresher.beam.WriteDataset(exchange="runner")``: elements
with a uniform 64-bit hash and 790 bytes of payload are put in 65,536 buckets by the hash's
leading 16 bits, a CombineGlobally counts them per bucket (a side input), each element goes
to the shard(s) its bucket overlaps, a GroupByKey groups them by shard, and a DoFn counts
what each group holds per bucket. Every bucket that reaches a group must be there whole
(the routing depends on the bucket only), so a short bucket is an element that the runner
lost; the DoFn then fails the pipeline with "shard S: got G of the C elements of bucket B".

    for i in 1 2 3 4 5; do python benchmarks/beam_gbk_check.py 400000 16 || echo SHORT; done

Run it as a script (as above). The exit status is 1 when a group was short. On a shared
2-core machine, 5 of 14 runs failed while other Beam pipelines ran at the same time, and 9
of 9 passed when the machine was quieter.
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Iterator
from typing import Any

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions

N, SHARDS = (int(sys.argv[1]), int(sys.argv[2])) if len(sys.argv) == 3 else (400_000, 16)
CHUNK, BUCKETS = 5_000, 1 << 16


def chunk(c: int) -> Iterator[tuple[bytes, bytes]]:
    for i in range(c * CHUNK, min((c + 1) * CHUNK, N)):
        yield hashlib.blake2b(str(i).encode(), digest_size=8).digest() + str(i).encode(), bytes(790)


def bucket(kv: tuple[bytes, bytes]) -> tuple[int, bytes, bytes]:
    return int.from_bytes(kv[0][:2], "big"), kv[0], kv[1]


class Count(beam.CombineFn):
    """Elements per bucket, as prefix sums (``starts[b]`` is where bucket ``b`` begins)."""

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


def route(r: tuple[int, bytes, bytes], starts: list[int]) -> Iterator[tuple[int, Any]]:
    n, lo, hi = starts[-1], starts[r[0]], starts[r[0] + 1]
    for s in range(lo * SHARDS // n, (hi - 1) * SHARDS // n + 1):
        yield s, r


def check(item: tuple[int, Any], starts: list[int]) -> Iterator[tuple[int, int]]:
    s, values = item
    values = list(values)
    got: dict[int, int] = {}
    for b, _, _ in values:
        got[b] = got.get(b, 0) + 1
    for b, c in got.items():
        if c != starts[b + 1] - starts[b]:
            raise RuntimeError(f"shard {s}: got {c} of the {starts[b + 1] - starts[b]} elements of bucket {b}")
    yield s, len(values)


def main() -> None:
    opts = PipelineOptions(flags=[], direct_num_workers=2, direct_running_mode="multi_processing")
    with beam.Pipeline("DirectRunner", options=opts) as p:
        b = p | beam.Create(range(-(-N // CHUNK))) | beam.FlatMap(chunk) | beam.Map(bucket)
        plan = beam.pvalue.AsSingleton(b | beam.CombineGlobally(Count()))
        _ = (b | beam.FlatMap(route, plan) | beam.GroupByKey() | beam.FlatMap(check, plan)
             | beam.combiners.ToList() | beam.Map(lambda w: print("groups", len(w), file=sys.stderr)))
    print(f"{N} elements in {SHARDS} groups: every bucket whole")


if __name__ == "__main__":
    main()
