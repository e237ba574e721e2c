"""Modules named with preload_in_workers are imported in the fork server, so workers have them."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

from thresher.loader.pool.worker_start import start_method


def test_preloaded_modules_are_in_the_workers_and_the_rest_is_not() -> None:
    script = textwrap.dedent("""
        import sys
        import thresher as th

        def loaded(_):
            return ("colorsys" in sys.modules, "this" in sys.modules)

        if __name__ == "__main__":
            th.loader.preload_in_workers(["colorsys"])
            from thresher.loader import warm_start
            assert warm_start.wait(120)
            loader = th.DataLoader(th.sources.RangeDataSource(0, 4), th.IndexSampler(4), [loaded],
                                   worker_count=1, warm_start=False)  # every chunk in the worker
            print(sorted(set(loader)), "colorsys" in sys.modules)
    """)
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    preloaded = start_method() == "forkserver"
    assert out.stdout.split("]")[0] + "]" == f"[({preloaded}, False)]"
    assert out.stdout.strip().endswith("False")  # the main process never imported it


SCRIPT = """\
import os
import time

with open(__file__ + ".log", "a") as log:  # what a heavy import (torch, jax) costs: once per process that runs it
    log.write(f"{os.getpid()}\\n")

import thresher as th


def pid(x):
    return os.getpid()


if __name__ == "__main__":
    loader = th.DataLoader(th.sources.RangeDataSource(0, 8), th.IndexSampler(8), [pid], worker_count=2, chunk_size=2)
    workers = set()
    for epoch in range(2):
        workers |= set(loader)
    print(sorted(workers))
"""


def test_workers_of_a_script_do_not_run_its_top_level_again(tmp_path) -> None:
    """The fork server and its workers never run it: thresher ships the pipeline by value."""
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    workers = set(eval(out.stdout.strip().splitlines()[-1]))
    ran = [int(line) for line in (tmp_path / "train.py.log").read_text().split()]
    assert len(workers) == 4  # two epochs of two workers
    assert not workers & set(ran), "a worker ran the script's top level again"
    assert len(ran) == (1 if start_method() == "forkserver" else 1 + len(workers))  # this process only


OWN_POOL = """\
import multiprocessing
import os

with open(__file__ + ".log", "a") as log:
    log.write(f"{os.getpid()}\\n")

import thresher as th


def square(x):  # pickled by reference (plain pickle): a worker must run the script to find it
    return x * x


if __name__ == "__main__":
    loader = th.DataLoader(th.sources.RangeDataSource(0, 4), th.IndexSampler(4), [square], worker_count=1)
    print(list(loader))
    with multiprocessing.get_context("forkserver").Pool(1) as pool:  # the user's own job, on the same server
        print(pool.map(square, range(4)))
"""


def test_a_multiprocessing_job_of_the_users_own_still_finds_the_main_modules_functions(tmp_path) -> None:
    script = tmp_path / "job.py"
    script.write_text(OWN_POOL)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["[0,", "1,", "4,", "9]", "[0,", "1,", "4,", "9]"]
    ran = (tmp_path / "job.py.log").read_text().split()
    assert len(ran) == 2  # this process, and the pool's worker when it looked `square` up


NEVER_ITERATES = """\
import os

with open(__file__ + ".log", "a") as log:
    log.write(f"{os.getpid()}\\n")

import thresher as th

if __name__ == "__main__":  # the fork server starts here, in the background; the script ends at once
    th.DataLoader(th.sources.RangeDataSource(0, 4), th.IndexSampler(4), [abs], worker_count=2)
"""


def test_a_script_that_ends_while_the_fork_server_starts_runs_its_top_level_once(tmp_path) -> None:
    """The server, finding its training process gone, exits: nothing it forks runs the script."""
    script = tmp_path / "short.py"
    script.write_text(NEVER_ITERATES)
    for _ in range(3):
        out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                             cwd=tmp_path)
        assert out.returncode == 0, out.stderr
    time.sleep(5.0)  # a server left behind would have finished its imports and forked by now
    assert len((tmp_path / "short.py.log").read_text().split()) == 3


def test_the_pipelines_thresher_modules_are_preloaded_in_the_fork_server(tmp_path) -> None:
    # Constructing a DataLoader with worker processes adds the thresher modules its pickled
    # pipeline names (the source's, the operations') to the fork server's preloads, so that
    # each worker does not import them again while it loads the pipeline.
    script = textwrap.dedent(f"""
        import thresher as th
        from thresher.loader.pool.worker_start import preload_modules
        if __name__ == "__main__":
            path = {str(tmp_path / "d.array_record")!r}
            th.sources.write_array_record(path, [bytes([i]) for i in range(16)])
            before = preload_modules()
            loader = th.DataLoader(th.sources.ArrayRecordSource(path), th.IndexSampler(16),
                                   [th.MapTransform(len), th.Batch(4)], worker_count=2)
            after = preload_modules()
            print([m for m in after if m not in before])
            print(sum(int(x.sum()) for x in loader))
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    added, total = out.stdout.strip().split("\n")
    assert "'thresher.sources.formats.array_record.source'" in added
    assert "'thresher.transforms.batch'" in added or "'thresher.transforms'" in added
    assert total == "16"
