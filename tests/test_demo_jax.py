"""The JAX demo: Orbax mid-epoch, restored in fresh processes, the same loss curve."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.helpers import REPO

import jax  # noqa: E402,F401  (the test extra has these: a missing one fails)
import orbax.checkpoint  # noqa: E402,F401
import sklearn  # noqa: E402,F401


@pytest.mark.parametrize("processes, workers", [(1, 2), (2, 0)])  # (1, 2): the README's command
def test_jax_demo_restores_the_loss_curve_bit_for_bit(tmp_path, processes: int, workers: int) -> None:
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    proc = subprocess.run([sys.executable, "-m", "thresher.demo", "--processes", str(processes), "--jax",
                           "--workers", str(workers), "--epochs", "2", "--data-dir", str(tmp_path)],
                          capture_output=True, text=True, cwd=REPO, timeout=300, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert "identical, bit for bit" in proc.stdout
    assert f"{processes} process(es)" in proc.stdout
    accuracy = float(proc.stdout.split("test accuracy ")[1].split(" ")[0])
    assert accuracy > 0.8
