"""The engine's promises checked on a format's source: same batches for every worker count
and mode, exact resume in a fresh process, small pickles.

A source is described by a ``(kind, args)`` pair that a fresh process can rebuild
(``make_source``), so the resume check runs in a new interpreter.
"""

from __future__ import annotations

import hashlib
import json
import pickle
import subprocess
import sys
from typing import Any

import numpy as np

import thresher as th
from tests.helpers import REPO, digest


def make_source(kind: str, args: dict[str, Any]) -> Any:
    if kind == "tfds":
        return th.data_source(args.pop("path"), **args)
    names = {"image_folder": "ImageFolderSource", "tfrecord": "TFRecordSource", "webdataset": "WebDatasetSource"}
    return getattr(th.sources, names[kind])(**args)


def fingerprint(record: Any) -> np.ndarray:
    """A record (bytes, dict of bytes/str/int/arrays) as 32 uint8: batches stack these."""
    h = hashlib.sha256()

    def walk(x: Any) -> None:
        if isinstance(x, dict):
            for k in sorted(x):
                h.update(repr(k).encode())
                walk(x[k])
        elif isinstance(x, (bytes, str, int)):
            h.update(repr(x).encode())
        else:
            a = np.asarray(x)
            h.update(str(a.dtype).encode() + repr(a.shape).encode() + np.ascontiguousarray(a).tobytes())

    walk(record)
    return np.frombuffer(h.digest(), dtype=np.uint8).copy()


def loader(kind: str, args: dict[str, Any], workers: int = 0, mode: str = "process", seed: int = 3,
           batch: int = 3, errors: str = "raise") -> th.DataLoader:
    src = make_source(kind, dict(args))
    sampler = th.IndexSampler(len(src), shuffle=True, seed=seed, num_epochs=2)
    return th.DataLoader(src, sampler, [fingerprint, th.Batch(batch)], worker_count=workers,
                         worker_mode=mode if workers else None, errors=errors)


def batches(kind: str, args: dict[str, Any], workers: int = 0, mode: str = "process",
            errors: str = "raise") -> list[str]:
    return [digest(b) for b in loader(kind, args, workers, mode, errors=errors)]


def check_worker_counts(kind: str, args: dict[str, Any]) -> list[str]:
    """Batches for 0 workers, 2 threads and 2 processes are identical; returns them."""
    base = batches(kind, args)
    assert batches(kind, args, 2, "thread") == base
    assert batches(kind, args, 2, "process") == base
    return base


def check_fresh_resume(kind: str, args: dict[str, Any], stop: int, workers: int = 0) -> None:
    """Stops after ``stop`` batches, restores the state in a new interpreter: same rest."""
    full = batches(kind, args)
    it = iter(loader(kind, args))
    for _ in range(stop):
        next(it)
    state = json.loads(json.dumps(it.get_state()))
    it.close()
    code = (
        "import json, sys\n"
        "from tests.sources.formats.engine import loader\n"
        "from tests.helpers import digest\n"
        "a = json.loads(sys.stdin.read())\n"
        "it = iter(loader(a['kind'], a['args'], a['workers']))\n"
        "it.set_state(a['state'])\n"
        "print(json.dumps([digest(b) for b in it]))\n"
    )
    payload = json.dumps({"kind": kind, "args": args, "state": state, "workers": workers})
    proc = subprocess.run([sys.executable, "-c", code], input=payload, capture_output=True, text=True,
                          cwd=REPO, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == full[stop:]


def check_small_pickle(source: Any, limit: int = 4096) -> Any:
    """The source pickles in under ``limit`` bytes and reads the same after unpickling."""
    blob = pickle.dumps(source)
    assert len(blob) < limit, len(blob)
    again = pickle.loads(blob)
    assert len(again) == len(source)
    for k in {0, len(source) // 2, len(source) - 1}:
        assert digest(fingerprint(again[k])) == digest(fingerprint(source[k]))
    return again
