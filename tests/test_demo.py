"""The README's main job runs end to end and shows an exact resume."""

from __future__ import annotations

import os
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


def _demo_dirs(tmp: str) -> list[str]:
    return sorted(n for n in os.listdir(tmp) if n.startswith("thresher-demo-"))


def test_demo_removes_its_temporary_directory_unless_kept(tmp_path) -> None:
    env = dict(os.environ, TMPDIR=str(tmp_path))
    run = [sys.executable, "-m", "thresher.demo", "--epochs", "2"]
    proc = subprocess.run(run, capture_output=True, text=True, cwd=REPO, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr
    assert _demo_dirs(str(tmp_path)) == [] and "removed " in proc.stdout
    proc = subprocess.run(run + ["--keep"], capture_output=True, text=True, cwd=REPO, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr
    kept = _demo_dirs(str(tmp_path))
    assert len(kept) == 1 and f"are in {tmp_path / kept[0]}" in proc.stdout
    assert sorted(os.listdir(tmp_path / kept[0])) == ["digits-test.array_record", "digits-train.array_record"]
