"""Dataset chains described by JSON specs, so that a fresh process can rebuild them exactly.

A spec is ``{"source": ..., "steps": [[name, *args], ...]}``. Sources:
``["range", n]``, ``["files", [paths]]`` (ArrayRecord files of encoded ints, read as
one source), ``["interleave", [paths], cycle, block]`` (one dataset per file),
``["mix", [spec, ...], [weights], seed]``, ``["tokens", n]`` (variable-length
token records for packing).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from typing import Any

import numpy as np

import thresher as th
from tests.helpers import digest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# -- the functions a spec may name (module level: the same in every process) ----------------------
def inc(x: Any) -> Any:
    return x + 1


def scramble(x: Any) -> Any:
    return (x * 2654435761 + 12345) % 1000003


def jitter(x: Any, rng: np.random.Generator) -> Any:
    return x + rng.integers(0, 1000, size=np.shape(x))


def keep(x: Any) -> bool:
    return int(np.asarray(x).sum()) * 2654435761 % 1000 >= 300


def cumsum(x: Any) -> Any:
    return np.cumsum(x, axis=0)


def decode_int(b: bytes) -> int:
    return int(np.frombuffer(b, dtype=np.int64)[0])


def encode_int(x: int) -> bytes:
    return np.int64(x).tobytes()


def tokens_of(k: int) -> np.ndarray:
    """Record k of a token dataset: 1..48 int32 tokens, all encoding k (so each can be traced)."""
    n = 1 + (k * 7919) % 48
    return (np.int64(k) * 1000 + np.arange(n)).astype(np.int32)


MAPS = {"inc": inc, "scramble": scramble, "cumsum": cumsum, "tokens": tokens_of}


def write_int_files(directory: str, lengths: list[int], start: int = 0) -> list[str]:
    paths = []
    k = start
    for i, n in enumerate(lengths):
        p = os.path.join(directory, f"part-{i:03d}.array_record")
        th.sources.write_array_record(p, [encode_int(k + j) for j in range(n)])
        k += n
        paths.append(p)
    return paths


def _source(src: list[Any]) -> th.Dataset:
    kind = src[0]
    if kind == "range":
        return th.Dataset.range(src[1])
    if kind == "files":
        return th.Dataset.source(th.sources.ArrayRecordSource(src[1])).map(decode_int)
    if kind == "interleave":
        parts = [th.Dataset.source(th.sources.ArrayRecordSource(p)).map(decode_int) for p in src[1]]
        return th.Dataset.interleave(parts, cycle_length=src[2], block_length=src[3])
    if kind == "mix":
        return th.Dataset.mix([build(s) for s in src[1]], src[2], seed=src[3], period=src[4] if len(src) > 4 else 1000)
    if kind == "tokens":
        return th.Dataset.range(src[1]).map(tokens_of)
    raise ValueError(src)


def build(spec: dict[str, Any], worker_count: int | None = None, optimize: bool = True) -> th.Dataset:
    ds = _source(spec["source"])
    for step in spec["steps"]:
        name, args = step[0], step[1:]
        if name == "shuffle":  # ["shuffle", seed] or, a block shuffle, ["shuffle", seed, block_size, window_blocks]
            ds = ds.shuffle(args[0], block=th.BlockShuffle(args[1], args[2]) if len(args) > 1 else None)
        elif name == "repeat":
            ds = ds.repeat(args[0], reseed_each_epoch=args[1] if len(args) > 1 else True)
        elif name == "map":
            ds = ds.map(MAPS[args[0]], batchable=bool(args[1]) if len(args) > 1 else False)
        elif name == "random_map":
            ds = ds.random_map(jitter, seed=args[0])
        elif name == "filter":
            ds = ds.filter(keep)
        elif name == "batch":
            ds = ds.batch(args[0], drop_remainder=args[1], pad_to=args[2] if len(args) > 2 else None)
        elif name == "map_batch":
            ds = ds.map_batch(MAPS[args[0]])
        elif name == "slice":
            ds = ds[args[0]:args[1]:args[2]]
        elif name == "cache":
            ds = ds.cache(args[0] if args else None)
        elif name == "shard":
            ds = ds.shard(th.ShardOptions(args[0], args[1], args[2]))
        elif name == "pack":
            ds = ds.pack(args[0], window=args[1])
        else:
            raise ValueError(step)
    if worker_count:
        ds = ds.prefetch(worker_count=worker_count)
    return ds.with_options(optimize=optimize)


def take(ds_or_it: Any, limit: int) -> list[str]:
    out: list[str] = []
    if limit <= 0:
        return out
    for x in ds_or_it:
        out.append(digest(x))
        if len(out) >= limit:
            break
    return out


# -- random chains ------------------------------------------------------------------------------------
def random_shuffle(r: random.Random) -> list[Any]:
    """A full shuffle step, or (one in three) a block shuffle of small blocks and windows."""
    if r.random() < 2 / 3:
        return ["shuffle", r.randrange(2**64)]
    return ["shuffle", r.randrange(2**64), r.randint(1, 8), r.randint(1, 4)]


def random_component(r: random.Random, files: list[str] | None) -> dict[str, Any]:
    """A random-access, endless or finite chain (a mix component)."""
    src: list[Any] = ["range", r.randint(1, 40)] if files is None or r.random() < 0.6 else ["files", files]
    steps: list[list[Any]] = []
    if r.random() < 0.7:
        steps.append(random_shuffle(r))
    if r.random() < 0.4:
        steps.append(["map", r.choice(["inc", "scramble"])])
    if r.random() < 0.3:
        steps.append(["random_map", r.randrange(1000)])
    steps.append(["repeat", r.choice([None, None, 2, 5])])
    return {"source": src, "steps": steps}


def random_spec(r: random.Random, files: list[str] | None = None) -> dict[str, Any]:
    """A random valid chain over ints: any order of the ops the compiler accepts."""
    roll = r.random()
    if roll < 0.15 and files is not None:
        src: list[Any] = ["interleave", files, r.randint(1, 3), r.randint(1, 3)]
    elif roll < 0.3:
        src = ["mix", [random_component(r, files) for _ in range(r.randint(1, 3))],
               [r.choice([1, 2, 3]) for _ in range(3)], r.choice([None, r.randrange(100)]), r.choice([7, 100, 1000])]
        src[2] = src[2][:len(src[1])]
    elif roll < 0.45 and files is not None:
        src = ["files", files]
    else:
        src = ["range", r.randint(0, 60)]
    endless = src[0] == "mix" and all(s["steps"][-1] == ["repeat", None] for s in src[1])
    random_access, batched, sharded, whole, rebatched = True, False, False, True, False
    steps: list[list[Any]] = []
    for _ in range(r.randint(0, 6)):
        if rebatched:  # batches of filtered batches: only maps on them follow
            steps.append(["map_batch", "cumsum"])
            continue
        options = ["map", "map", "random_map"] + ([] if endless else ["filter"])
        if not endless:
            options += ["shuffle", "cache"] if random_access or not batched else ["shuffle"]
        if (random_access or not batched) and not endless:
            options += ["slice"]  # after a filter: positions, holes included (as Grain)
        if not batched and not endless:
            options += ["repeat"]
        options += ["map_batch"] if batched else ["batch", "batch"]
        if batched and whole:
            options += ["batch"]  # batches of batches (of a filtered stream too)
        if not sharded:
            options.append("shard")
        op = r.choice(options)
        if op == "map":
            steps.append(["map", r.choice(["inc", "scramble"]), r.random() < 0.5])
        elif op == "random_map":
            steps.append(["random_map", r.randrange(2**32)])
        elif op == "filter":
            steps.append(["filter"])
            random_access = False
        elif op == "shuffle":
            steps.append(random_shuffle(r))
        elif op == "cache":
            steps.append(["cache"])
        elif op == "slice":
            steps.append(["slice", r.choice([None, 0, 1, 3, -5]), r.choice([None, 10, 50, -1]), r.choice([None, 1, 2, 3])])
        elif op == "repeat":
            steps.append(["repeat", r.choice([1, 2, 3]), r.random() < 0.7])
        elif op == "batch":
            drop = r.random() < 0.3
            rebatched = batched and not random_access
            steps.append(["batch", r.randint(1, 5), drop])
            whole = whole and drop  # batches of batches need equal shapes
            batched = True
        elif op == "map_batch":
            steps.append(["map_batch", "cumsum"])
        elif op == "shard":
            n = r.randint(1, 3)
            steps.append(["shard", r.randrange(n), n, r.random() < 0.5])
            sharded = True
    return {"source": src, "steps": steps}


def run_fresh_many(jobs: list[dict[str, Any]]) -> list[list[str]]:
    """For each job {spec, state, limit, workers}: restores the state in ONE fresh process
    (one process for all jobs, to keep the suite fast) and returns the next digests."""
    code = (
        "import json, sys\n"
        "from tests.dataset.spec import build, take\n"
        "out = []\n"
        "for job in json.loads(sys.stdin.read()):\n"
        "    it = iter(build(job['spec'], job.get('workers'), job.get('optimize', True)))\n"
        "    if job['state'] is not None: it.set_state(job['state'])\n"
        "    out.append(take(it, job['limit']))\n"
        "    it.close()\n"
        "print(json.dumps(out))\n"
    )
    return run_in_fresh_process(code, jobs)


def run_in_fresh_process(code: str, payload: Any) -> Any:
    """Runs ``code`` in a new Python process (cwd: the repository) with ``payload`` as JSON on
    stdin; returns the JSON it printed last."""
    proc = subprocess.run([sys.executable, "-c", code], input=json.dumps(payload), capture_output=True, text=True,
                          cwd=REPO, timeout=300)
    if proc.returncode != 0:
        raise AssertionError(f"fresh process failed:\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])
