"""The leak guard (tests/leak_guard.py) fails a test that leaves a process or workers behind, and
only such a test: the fork server started by a test, and a module fixture's server, are not leaks."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time

from tests import processes

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

TESTS = '''
import subprocess, sys
import pytest
import thresher as th

KEPT = []

def _loader():
    return th.DataLoader(th.sources.RangeDataSource(0, 64), th.IndexSampler(64), [th.Batch(4)],
                         worker_count=2, chunk_size=8, warm_start=False)  # workers from the first chunk

@pytest.fixture(scope="module")
def server():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield proc
    proc.kill()
    proc.wait()

def test_a_clean_iterator_with_workers_first_starts_the_fork_server():
    with iter(_loader()) as it:
        assert len(list(it)) == 16

def test_uses_a_module_server(server):
    assert server.poll() is None

def test_leaks_a_process():
    KEPT.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(61)"]))

def test_keeps_an_iterator_with_workers():
    it = iter(_loader())
    next(it)
    KEPT.append(it)

def test_clean_again_after_the_leaks():
    assert [b.tolist() for b in _loader()][0] == [0, 1, 2, 3]
'''


def test_the_guard_fails_exactly_the_tests_that_leave_processes_behind(tmp_path: os.PathLike[str]) -> None:
    path = os.path.join(str(tmp_path), "test_leaky.py")
    with open(path, "w") as f:
        f.write(TESTS)
    env = dict(os.environ, PYTHONPATH=ROOT, THRESHER_TEST_LEAK_GRACE_S="1")
    started = time.monotonic()
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "tests.leak_guard", "-p", "no:cacheprovider",
           "--rootdir", str(tmp_path), path]
    proc = subprocess.run(cmd, cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert re.search(r"5 passed, 2 errors", out), out
    assert "ERROR at teardown of test_leaks_a_process" in out and "time.sleep(61)" in out
    assert "still alive 1 s later" in out
    assert "ERROR at teardown of test_keeps_an_iterator_with_workers" in out
    # (the short summary may repeat the lines: count pids, not lines)
    assert len(set(re.findall(r"pid (\d+): a worker process \(a child of the fork server\)", out))) == 2, out
    leaked = {int(p) for p in re.findall(r"pid (\d+):", out)}
    assert len(leaked) == 3
    assert not leaked & processes.live_descendants()  # the guard killed them; the session is over
    assert all(processes.parent(pid) is None for pid in leaked)
    assert time.monotonic() - started < 120
