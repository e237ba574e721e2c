"""Pipelines described by JSON-able specs, so a fresh process can rebuild them exactly."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from typing import Any

import numpy as np

import thresher as th

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _keep(spec: dict[str, Any]) -> Any:
    ratio = spec["filter_ratio"]

    def keep(x: Any) -> bool:
        return (int(np.asarray(x["key"]).sum()) * 2654435761 % 1000) / 1000.0 >= ratio

    return keep


def decode(b: bytes) -> dict[str, Any]:
    arr = np.frombuffer(b, dtype=np.uint8)
    return {"key": int(arr[:4].view(np.int32)[0]), "data": arr[4:].astype(np.float32)}


def augment(x: dict[str, Any], rng: np.random.Generator) -> dict[str, Any]:
    return {"key": x["key"], "data": x["data"] + rng.integers(0, 100, size=x["data"].shape)}


def make_records(n: int, width: int = 6) -> list[bytes]:
    out = []
    for k in range(n):
        payload = (np.arange(width, dtype=np.int64) * 7 + k) % 251
        out.append(np.int32(k).tobytes() + payload.astype(np.uint8).tobytes())
    return out


def build_loader(spec: dict[str, Any], worker_count: int | None = None) -> th.DataLoader:
    """spec: num_records, path (ArrayRecord) or None, shuffle, seed, num_epochs, shard_index,
    shard_count, shard_drop, filter_ratio (None: no filter), random_map, batch_size (None: no
    batch), drop_remainder, worker_count."""
    if spec.get("path"):
        source: Any = th.sources.ArrayRecordSource(spec["path"])
    else:
        source = th.sources.InMemoryDataSource(make_records(spec["num_records"]))
    sampler = th.IndexSampler(
        spec["num_records"], shuffle=spec["shuffle"], seed=spec["seed"], num_epochs=spec["num_epochs"],
        shard_options=th.ShardOptions(spec["shard_index"], spec["shard_count"], spec["shard_drop"]),
    )
    ops: list[Any] = [decode]
    if spec.get("random_map"):
        ops.append(th.RandomMapTransform(augment))
    if spec.get("filter_ratio") is not None:
        ops.append(th.FilterTransform(_keep(spec)))
    if spec.get("batch_size"):
        ops.append(th.Batch(spec["batch_size"], drop_remainder=spec["drop_remainder"]))
    w = spec.get("worker_count", 0) if worker_count is None else worker_count
    return th.DataLoader(source, sampler, ops, worker_count=w)


def digest(element: Any) -> str:
    """A stable hash of a pytree of arrays/scalars (dtype, shape and bytes of every leaf)."""
    h = hashlib.sha256()

    def walk(x: Any) -> None:
        if isinstance(x, dict):
            for k in sorted(x):
                h.update(repr(k).encode())
                walk(x[k])
        elif isinstance(x, (list, tuple)):
            h.update(b"(")
            for v in x:
                walk(v)
            h.update(b")")
        else:
            a = np.asarray(x)
            h.update(str(a.dtype).encode() + repr(a.shape).encode())
            h.update(np.ascontiguousarray(a).tobytes())

    walk(element)
    return h.hexdigest()[:20]


def run_fresh(spec: dict[str, Any], state: dict[str, Any] | None, limit: int,
              worker_count: int | None = None) -> list[str]:
    """Restores ``state`` in a fresh Python process and returns the digests of the next batches."""
    code = (
        "import json, sys\n"
        "from tests.helpers import build_loader, digest\n"
        "args = json.loads(sys.stdin.read())\n"
        "it = iter(build_loader(args['spec'], args['workers']))\n"
        "if args['state'] is not None: it.set_state(args['state'])\n"
        "out = []\n"
        "for b in it:\n"
        "    out.append(digest(b))\n"
        "    if len(out) >= args['limit']: break\n"
        "it.close()\n"
        "print(json.dumps(out))\n"
    )
    payload = json.dumps({"spec": spec, "state": state, "limit": limit, "workers": worker_count})
    proc = subprocess.run([sys.executable, "-c", code], input=payload, capture_output=True, text=True,
                          cwd=REPO, timeout=120)
    if proc.returncode != 0:
        raise AssertionError(f"fresh process failed:\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def dir_files(path: str) -> dict[str, bytes]:
    """Every file of a directory, by name: two prepared directories are equal byte for byte."""
    out = {}
    for name in sorted(os.listdir(path)):
        with open(os.path.join(path, name), "rb") as f:
            out[name] = f.read()
    return out


REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_script(script: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``script`` run in a fresh interpreter (``python -c``) with this checkout importable: for
    what must not touch the test process (a lowered descriptor limit, a crash)."""
    return subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ, PYTHONPATH=REPO_ROOT))


def without_descriptors(setup: str, steps: list[str]) -> list[str]:
    """Runs ``setup`` in a fresh interpreter, lowers its descriptor limit to 3 (none left to
    open a file) and evaluates each expression of ``steps``: for each one that raises a
    SourceError, the words ``SourceError``, whether its message says the process has too many
    files open, and whether it names ``ulimit -n``. Fails the test if the script does."""
    script = (
        "import resource\n"
        "import thresher as th\n"
        "from thresher.errors import SourceError\n"
        f"{setup}\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (3, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))\n"
        f"for step in [{', '.join(f'lambda: {s}' for s in steps)}]:\n"
        "    try:\n"
        "        step()\n"
        "    except SourceError as e:\n"
        "        print(type(e).__name__, 'too many files open' in str(e), 'ulimit -n' in str(e))\n"
    )
    out = run_script(script)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout.split()


def answer_of_child(pid: int, read_fd: int, timeout_s: float = 60.0) -> bytes:
    """The one byte a bare-forked child writes to ``read_fd`` (then reaped), or a message when
    none comes within ``timeout_s``: the child is killed, so a hang in it fails the test instead
    of hanging the run. Closes ``read_fd``."""
    import select
    import signal

    ready, _, _ = select.select([read_fd], [], [], timeout_s)
    if not ready:
        os.kill(pid, signal.SIGKILL)
    answer = os.read(read_fd, 1) if ready else f"(no answer in {timeout_s:g} s)".encode()
    os.waitpid(pid, 0)
    os.close(read_fd)
    return answer
