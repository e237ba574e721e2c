"""Runs worker pipelines through every exit path and reports what appeared in /dev/shm.

Run by test_workers_shm_namespace.py inside a private /dev/shm (a new mount
namespace), where nothing but this process tree can create entries.
Usage: python -m tests.loader.shm_probe RECORDS_PATH  ->  prints JSON {"seen": [...], "left": [...]}
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from tests.loader import worker_helpers as wh
from thresher.errors import TransformError, WorkerError

seen: set[str] = set()


def look() -> None:
    seen.update(os.listdir("/dev/shm"))


def main(path: str) -> None:
    from thresher.loader import warm_start

    # Workers from the first batch on: a warm start would run ExitOn("kill") in this process.
    assert warm_start.wait(120.0)
    for cfg in (dict(batch=16, random_map=True), dict(batch=16, filter=True), dict(batch=None)):
        for _ in wh.build(path, **cfg, workers=2):
            look()
    try:
        for _ in wh.build(path, batch=8, extra=(wh.FailOn(50),), workers=2):
            look()
    except TransformError:
        pass
    try:
        for _ in wh.build(path, batch=8, extra=(wh.ExitOn(50, "kill"),), workers=2):
            look()
    except WorkerError:
        pass
    it = iter(wh.build(path, batch=8, num_epochs=None, workers=2))
    next(it)
    look()
    del it
    # A training process killed with SIGKILL while its workers are busy.
    child = subprocess.Popen([sys.executable, "-c", (
        "import sys, time\nfrom tests.loader import worker_helpers as wh\n"
        "it = iter(wh.build(sys.argv[1], batch=8, num_epochs=None, extra=(wh.slow,), workers=2))\n"
        "next(it); print('READY', flush=True); time.sleep(600)\n"), path], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdout.readline().startswith("READY")
    look()
    child.send_signal(signal.SIGKILL)
    child.wait()
    time.sleep(1.0)
    print(json.dumps({"seen": sorted(seen), "left": sorted(os.listdir("/dev/shm"))}))


if __name__ == "__main__":
    main(sys.argv[1])
