"""Modules named with preload_in_workers are imported in the fork server, so workers have them."""

from __future__ import annotations

import subprocess
import sys
import textwrap

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
