"""A writer killed mid-way (SIGKILL, Ctrl-C, an exception) leaves nothing a reader accepts."""

from __future__ import annotations

import glob
import os
import signal
import subprocess
import sys
import textwrap

import pytest

import thresher as th
from thresher import features as F
from thresher.errors import IncompleteDatasetError, SourceNotFoundError

SLOW_WRITER = textwrap.dedent("""
    import signal, sys, time
    import thresher as th
    from thresher import features as F

    # As in a terminal's foreground job, even when the tests run as a background job of a shell
    # without job control, which starts it (and so this process) with SIGINT ignored.
    signal.signal(signal.SIGINT, signal.default_int_handler)

    def rows():
        for i in range(10**6):
            if i == 200:
                print("STARTED", flush=True)
            if i >= 200:
                time.sleep(0.005)
            yield {"x": i, "name": str(i)}

    th.prepare(sys.argv[1], {"train": rows()}, features={"x": F.Scalar("int64"), "name": F.Text()},
               progress=False)
""")

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def start_writer(target):
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen([sys.executable, "-c", SLOW_WRITER, str(target)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    line = proc.stdout.readline()
    assert line.strip() == "STARTED", proc.stderr.read()
    return proc


def test_sigkill_mid_write_leaves_no_dataset(tmp_path):
    target = tmp_path / "ds"
    proc = start_writer(target)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert not target.exists()
    with pytest.raises(SourceNotFoundError, match="does not exist"):
        th.data_source(target)
    temps = glob.glob(str(tmp_path / ".ds.thresher-tmp-*"))
    assert len(temps) == 1
    with pytest.raises(IncompleteDatasetError, match="did not finish"):
        th.data_source(temps[0])
    with pytest.raises(IncompleteDatasetError):
        th.builder(temps[0])
    # A new prepare works beside the leftover.
    th.prepare(target, {"train": [{"x": 1}]}, features={"x": F.Scalar("int64")}, progress=False)
    assert len(th.data_source(target, split="train")) == 1


def test_ctrl_c_mid_write_cleans_up(tmp_path):
    target = tmp_path / "ds"
    proc = start_writer(target)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode != 0 and "KeyboardInterrupt" in err
    assert os.listdir(tmp_path) == []


def test_exception_mid_write_cleans_up(tmp_path):
    def rows():
        yield {"x": 1}
        raise RuntimeError("source broke")

    with pytest.raises(RuntimeError, match="source broke"):
        th.prepare(tmp_path / "ds", {"train": rows()}, features={"x": F.Scalar("int64")},
                   progress=False)
    assert os.listdir(tmp_path) == []


def test_failed_overwrite_keeps_the_old_dataset(tmp_path):
    target = tmp_path / "ds"
    th.prepare(target, {"train": [{"x": 1}, {"x": 2}]}, features={"x": F.Scalar("int64")},
               progress=False)

    def rows():
        yield {"x": 1}
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        th.prepare(target, {"train": rows()}, features={"x": F.Scalar("int64")},
                   overwrite=True, progress=False)
    assert len(th.data_source(target, split="train")) == 2
    assert os.listdir(tmp_path) == ["ds"]
