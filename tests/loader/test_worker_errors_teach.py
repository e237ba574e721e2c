"""Worker errors that say what to do: a script without a __main__ guard, a script read from
standard input, and a stream shorter than the workers asked for. Real scripts, run as a user
runs them, in subprocesses."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

import thresher as th
from tests.loader import worker_helpers as wh
from thresher.errors import WorkerError
from thresher.loader.main_module import has_main_guard

GUARD_ADVICE = 'put the training loop under `if __name__ == "__main__":`'

PIPELINE = """\
import thresher as th

def double(x):
    return x * 2

def make_loader(workers):
    return th.DataLoader(th.sources.RangeDataSource(0, 1000), th.IndexSampler(1000),
                         [double, th.Batch(10)], worker_count=workers)
"""

NO_GUARD = PIPELINE + """
print("top level ran", flush=True)
# An endless stream: the first chunks may come from this process while the fork server
# starts (the warm start); the workers take over soon after, and theirs is the error.
endless = th.DataLoader(th.sources.RangeDataSource(0, 1000), th.IndexSampler(1000, num_epochs=None),
                        [double, th.Batch(10)], worker_count=2)
total = sum(int(b.sum()) for b, _ in zip(endless, range(10**7)))
print("total", total)
"""

GUARDED = PIPELINE + """
if __name__ == "__main__":
    import sys
    workers = sys.argv[1] if len(sys.argv) > 1 else "2"
    loader = make_loader(workers if workers == "auto" else int(workers))
    print("total", sum(int(b.sum()) for b in loader))
    if workers == "auto":
        print(loader.autotune_report)
"""

TOTAL = f"total {2 * sum(range(1000))}"


def _python(args: list[str], cwd: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.run([sys.executable, *args], cwd=cwd, input=stdin, capture_output=True, text=True,
                          timeout=180, env=env)


def _last_line(proc: subprocess.CompletedProcess[str]) -> str:
    return proc.stderr.strip().splitlines()[-1]


def test_a_script_without_the_main_guard_is_told_to_add_it(tmp_path) -> None:
    (tmp_path / "train.py").write_text(NO_GUARD)
    proc = _python(["train.py"], str(tmp_path))
    assert proc.returncode == 1
    last = _last_line(proc)
    assert last.startswith("thresher.errors.WorkerError:"), proc.stderr[-3000:]
    assert GUARD_ADVICE in last and "before its first chunk" in last
    assert "os._exit" not in last and "segmentation" not in last and "out of memory" not in last


SMALL_NO_GUARD = """\
import sys
import thresher as th

n, warm = int(sys.argv[1]), sys.argv[2] == "warm"
loader = th.DataLoader(th.sources.RangeDataSource(0, n), th.IndexSampler(n), [abs, th.Batch(5)], worker_count=2,
                       warm_start=warm)
it = iter(loader)
print("first batch", next(it).tolist(), flush=True)
"""


@pytest.mark.parametrize("n, warm", [(10, "default"), (10**6, "default"), (10, "warm")])
def test_a_missing_guard_is_an_error_on_the_first_batch_whatever_the_data_size(tmp_path, n: int, warm: str) -> None:
    (tmp_path / "train.py").write_text(SMALL_NO_GUARD)
    proc = _python(["train.py", str(n), warm], str(tmp_path))
    assert proc.returncode == 1 and "first batch" not in proc.stdout, proc.stdout[-2000:]
    last = _last_line(proc)
    assert last.startswith("thresher.errors.WorkerError:"), proc.stderr[-3000:]
    assert GUARD_ADVICE in last and "before its first chunk" in last and "train.py" in last


TRACEBACK = """\
import thresher as th


def parse(x):
    if x == 7:
        raise ValueError("record seven is corrupt")
    return x


if __name__ == "__main__":
    loader = th.DataLoader(th.sources.RangeDataSource(0, 20), th.IndexSampler(20), [parse, th.Batch(4)],
                           worker_count=2, chunk_size=4)
    list(loader)
"""


def test_a_worker_traceback_names_the_scripts_file_line_and_source(tmp_path) -> None:
    (tmp_path / "train.py").write_text(TRACEBACK)
    proc = _python(["train.py"], str(tmp_path))
    assert proc.returncode == 1
    where = f'File "{tmp_path / "train.py"}", line 6, in parse\n    raise ValueError("record seven is corrupt")'
    assert where in proc.stderr, proc.stderr[-3000:]
    assert "<dynamic-code>" not in proc.stderr
    assert "worker 1 of 2" in proc.stderr  # chunk 1 (positions 4..7)


def test_the_same_script_with_the_guard_runs(tmp_path) -> None:
    (tmp_path / "train.py").write_text(GUARDED)
    proc = _python(["train.py"], str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert TOTAL in proc.stdout


def test_a_script_read_from_stdin_is_told_why_workers_cannot_start(tmp_path) -> None:
    proc = _python(["-"], str(tmp_path), stdin=GUARDED)
    assert proc.returncode == 1
    last = _last_line(proc)
    assert last.startswith("thresher.errors.WorkerError:"), proc.stderr[-3000:]
    assert "standard input (python -)" in last and "worker_count=0" in last and "Save the script" in last
    assert "FileNotFoundError" not in proc.stderr  # no worker was started to fail


@pytest.mark.parametrize("workers", ["auto", "0"])
def test_a_script_read_from_stdin_runs_in_process_with_auto_and_with_zero(tmp_path, workers: str) -> None:
    proc = _python(["-", workers], str(tmp_path), stdin=GUARDED)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert TOTAL in proc.stdout
    if workers == "auto":
        assert "processes cannot be used: the main module was read from standard input" in proc.stdout


def test_python_c_and_python_m_are_not_mistaken_for_a_missing_guard(tmp_path) -> None:
    (tmp_path / "train_mod.py").write_text(GUARDED)
    proc = _python(["-m", "train_mod"], str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert TOTAL in proc.stdout
    code = PIPELINE + "\nprint('total', sum(int(b.sum()) for b in make_loader(2)))\n"
    proc = _python(["-c", code], str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert TOTAL in proc.stdout


@pytest.mark.usefixtures("no_leaks")
def test_fewer_chunks_than_workers_are_named_as_such(records_path: str) -> None:
    # 64 records are one chunk: one worker starts for worker_count=2, and the error says so.
    loader = wh.build(records_path, n=64, batch=8, extra=(wh.ExitOn(5),), workers=2)
    with pytest.raises(WorkerError) as info:
        list(loader)
    message = str(info.value)
    assert "of 1" not in message
    assert "worker 0 (pid" in message and "1 of the worker_count=2 workers were started" in message
    assert "only 1 chunk" in message and "exit code 3" in message


@pytest.mark.parametrize("source, guarded", [
    ('if __name__ == "__main__":\n    main()\n', True),
    ("if '__main__' == __name__: main()\n", True),
    ("if __name__=='__main__':\n    main()\n", True),
    ("main()\n# __name__ is not compared here\n", False),
    ('print("__main__")\n', False),
])
def test_has_main_guard(source: str, guarded: bool) -> None:
    assert has_main_guard(textwrap.dedent(source)) is guarded


def test_the_library_itself_does_not_trip_the_check() -> None:
    # Under pytest the main module has a guard (or is run by name): a worker that exits with
    # status 1 keeps the generic message.
    from thresher.loader.main_module import missing_guard, unimportable_main

    assert unimportable_main() is None and missing_guard() is False
    assert th.DataLoader  # the import above is the package's own
