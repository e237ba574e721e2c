"""Opening an ArrayRecordSource over many files under ``ulimit -n 1024``.

``python -m benchmarks.many_files [--files 10000] [--dir DIR] [--keep]``

Writes ``--files`` ArrayRecord files of one 64-byte record each (array_record makes each
at least 128 KiB on disk, which is why the default is 10,000 and not 100,000), then, in a
child process whose descriptor limit is 1,024: opens the source cold (record counts read
on threads, the JSON index written), opens it again (counts from the index), and reads
10,000 records in shuffled order through a DataLoader with 16 reads in flight. Prints
the seconds of each step and the peak number of open descriptors (sampled every ms).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

_CHILD = """
import os, resource, sys, threading, time
import thresher as th
resource.setrlimit(resource.RLIMIT_NOFILE, (1024, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
peak, done = [0], threading.Event()
def sample():
    while not done.is_set():
        peak[0] = max(peak[0], len(os.listdir("/proc/self/fd")))
        time.sleep(0.001)
threading.Thread(target=sample, daemon=True).start()
pattern = sys.argv[1] + "/*.array_record"
t = time.perf_counter(); src = th.sources.ArrayRecordSource(pattern, index=True); cold = time.perf_counter() - t
t = time.perf_counter(); src = th.sources.ArrayRecordSource(pattern, index=True); warm = time.perf_counter() - t
n = min(10_000, len(src))
loader = th.DataLoader(src, th.IndexSampler(len(src), shuffle=True, seed=0), [len, th.Batch(100)],
                       read_options=th.ReadOptions(num_threads=16))
t = time.perf_counter(); got = 0
for b in loader:
    got += len(b)
    if got >= n:
        break
read = time.perf_counter() - t
done.set()
print(f"{len(src)} files: open cold {cold:.2f} s, open with the index {warm:.2f} s, "
      f"{got} shuffled records read in {read:.2f} s; peak open descriptors {peak[0]} (limit 1024)")
"""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.many_files", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=10_000)
    ap.add_argument("--dir", default=None, help="where to write the files (default: a temporary directory)")
    ap.add_argument("--keep", action="store_true", help="keep the files")
    args = ap.parse_args(argv)
    import thresher as th

    d = args.dir or tempfile.mkdtemp(prefix="thresher-many-files-")
    os.makedirs(d, exist_ok=True)
    try:
        t = time.perf_counter()
        for i in range(args.files):
            th.sources.write_array_record(os.path.join(d, f"part-{i:06d}.array_record"), [b"%064d" % i])
        print(f"wrote {args.files} files in {time.perf_counter() - t:.1f} s")
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
        proc = subprocess.run([sys.executable, "-c", _CHILD, d], env=env, capture_output=True, text=True)
        print(proc.stdout.strip() or proc.stderr[-3000:])
        return proc.returncode
    finally:
        if not args.keep:
            shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
