"""The strict shared-memory check: in a private /dev/shm, nothing ever appears.

On a shared machine other processes use /dev/shm too, so the per-test leak checks
cannot blame every new entry on thresher. Here the probe runs in a new mount
namespace with its own empty /dev/shm, where only its own process tree can create
entries: worker results must never create one (thresher uses anonymous memfd
memory), on any path, SIGKILL of a worker or of the training process included.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def _private_shm_prefix() -> list[str] | None:
    """An ``unshare`` command line that gives its command a private, empty /dev/shm."""
    if not sys.platform.startswith("linux") or shutil.which("unshare") is None:
        return None
    mount = "mount -t tmpfs tmpfs /dev/shm && exec \"$@\""
    for flags in (["--mount"], ["--user", "--map-root-user", "--mount"]):
        cmd = ["unshare", *flags, "sh", "-c", mount, "sh"]
        try:
            ok = subprocess.run([*cmd, "true"], capture_output=True, timeout=10).returncode == 0
        except (OSError, subprocess.SubprocessError):
            ok = False
        if ok:
            return cmd
    return None


def test_worker_results_never_create_a_dev_shm_entry(records_path: str) -> None:
    prefix = _private_shm_prefix()
    if prefix is None:
        pytest.skip("cannot make a private /dev/shm here (needs unshare and mount namespaces)")
    env = dict(os.environ, PYTHONPATH=ROOT)
    proc = subprocess.run([*prefix, sys.executable, "-m", "tests.loader.shm_probe", records_path],
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report == {"seen": [], "left": []}
