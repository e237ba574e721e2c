"""The README's main job runs end to end and shows an exact resume."""

from __future__ import annotations

import subprocess
import sys

from tests.helpers import REPO


def test_demo_trains_and_resumes_exactly(tmp_path) -> None:
    proc = subprocess.run([sys.executable, "-m", "thresher.demo", "--epochs", "4", "--data-dir", str(tmp_path)],
                          capture_output=True, text=True, cwd=REPO, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "bit-identical" in proc.stdout
    accuracy = float(proc.stdout.split("test accuracy ")[1].split(";")[0])
    assert accuracy > 0.85


def test_import_has_no_heavy_side_effects() -> None:
    code = ("import sys, thresher; heavy = {'jax', 'torch', 'tensorflow', 'PIL', 'cv2', 'matplotlib', 'sklearn', "
            "'tqdm', 'grain'} & set(sys.modules); print(sorted(heavy))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
