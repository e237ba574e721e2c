"""Disk full while `prepare` writes (a file-size limit, RLIMIT_FSIZE, in a child process):
the write fails with an error, and nothing half-written is ever accepted by a reader; an
existing dataset that was being overwritten stays intact."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import numpy as np
import pytest

import thresher as th
from thresher.errors import IncompleteDatasetError, SourceNotFoundError

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
N = 600

CHILD = r"""
import json, os, resource, signal, sys
import numpy as np
import thresher as th
from thresher import features as F

target, limit, mode, overwrite = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4] == "1"
rng = np.random.default_rng(int(sys.argv[5]))
columns = {"image": rng.integers(0, 255, (%d, 24, 24, 3), dtype=np.uint8), "label": np.arange(%d) %% 7}
# Python ignores SIGXFSZ, so a write past the limit fails with EFBIG ("error"); "signal" restores
# the default action, which kills the process at that write, as a shell tool would be killed.
signal.signal(signal.SIGXFSZ, signal.SIG_IGN if mode == "error" else signal.SIG_DFL)
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
try:
    th.prepare(target, {"train": columns, "test": {k: v[:50] for k, v in columns.items()}},
               features={"image": F.Image((24, 24, 3), encoding="none"), "label": F.ClassLabel(num_classes=7)},
               num_shards=2, overwrite=overwrite, progress=False)
except BaseException as e:
    print(json.dumps({"raised": type(e).__name__, "mro": [c.__name__ for c in type(e).__mro__], "message": str(e)}))
    sys.exit(3)
print(json.dumps({"raised": None}))
""" % (N, N)


def _prepare_in_child(target: str, limit: int, mode: str, overwrite: bool = False,
                      seed: int = 0) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", CHILD, target, str(limit), mode, "1" if overwrite else "0", str(seed)],
                          capture_output=True, text=True, timeout=180, cwd=REPO)


def _largest_file(directory: str) -> int:
    return max(os.path.getsize(os.path.join(directory, n)) for n in os.listdir(directory))


def _leftovers(parent: str) -> list[str]:
    return [n for n in os.listdir(parent) if ".thresher-tmp-" in n]


@pytest.fixture(scope="module")
def full_size(tmp_path_factory: pytest.TempPathFactory) -> int:
    """The size of the largest file a complete run writes (the limit is a fraction of it)."""
    target = str(tmp_path_factory.mktemp("full") / "ds")
    proc = _prepare_in_child(target, 2**40, "error")
    assert proc.returncode == 0, proc.stderr
    return _largest_file(target)


@pytest.mark.parametrize("fraction", [0.02, 0.3, 0.7, 0.97])
@pytest.mark.parametrize("mode", ["error", "signal"])
def test_a_full_disk_leaves_nothing_a_reader_accepts(tmp_path, full_size: int, fraction: float, mode: str) -> None:
    target = str(tmp_path / "ds")
    proc = _prepare_in_child(target, int(full_size * fraction), mode)
    if mode == "signal":
        assert proc.returncode == -signal.SIGXFSZ, (proc.returncode, proc.stderr[-2000:])
    else:
        assert proc.returncode == 3, (proc.returncode, proc.stdout, proc.stderr[-2000:])
        result = json.loads(proc.stdout.strip().splitlines()[-1])
        # The failure is reported as what it is: an OS error (or a thresher error wrapping one).
        assert "OSError" in result["mro"] or "ThresherError" in result["mro"], result
        assert _leftovers(str(tmp_path)) == []  # an exception cleans up after itself
    assert not os.path.exists(target)
    with pytest.raises(SourceNotFoundError):
        th.data_source(target)
    for left in _leftovers(str(tmp_path)):  # only after a kill: refused, never read
        with pytest.raises(IncompleteDatasetError):
            th.data_source(os.path.join(str(tmp_path), left))


@pytest.mark.parametrize("mode", ["error", "signal"])
def test_a_full_disk_during_an_overwrite_keeps_the_old_dataset(tmp_path, full_size: int, mode: str) -> None:
    target = str(tmp_path / "ds")
    assert _prepare_in_child(target, 2**40, "error", seed=1).returncode == 0
    before = [np.asarray(r["image"]).copy() for r in th.data_source(target, split="train[:5]").__getitems__(range(5))]
    proc = _prepare_in_child(target, int(full_size * 0.5), mode, overwrite=True, seed=2)
    assert proc.returncode != 0
    after = th.data_source(target, split="train[:5]").__getitems__(range(5))
    assert all(np.array_equal(a["image"], b) for a, b in zip(after, before))
    assert len(th.data_source(target, split="train")) == N
