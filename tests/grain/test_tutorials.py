"""Grain's tutorials, as scripts, run under ``import grain`` and ``import thresher.grain``.

Only the import line differs. Both runs must agree on everything that does not
depend on the order for a seed (which differs between Grain and thresher): the
number of batches, their structure and shapes, the records of each epoch; and in
each run a resume from the bytes (or dict) state continues exactly.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

TUTORIALS = Path(__file__).parent / "tutorials"
THRESHER_IMPORT = "import thresher.grain as grain  # the line that changes"


def _run(script: Path, grain_import: str | None, workdir: Path) -> dict[str, Any]:
    text = script.read_text()
    lines = text.splitlines()
    changed = [i for i, line in enumerate(lines) if line.endswith("# the line that changes")]
    assert len(changed) == 1, f"{script.name} must have exactly one import line to change"
    if grain_import is not None:
        lines[changed[0]] = grain_import
    copy = workdir / script.name
    copy.write_text("\n".join(lines) + "\n")
    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=str(root) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run([sys.executable, str(copy), str(workdir)], capture_output=True, text=True,
                          timeout=600, cwd=workdir, env=env)
    assert done.returncode == 0, f"{script.name} ({grain_import or 'Grain'}) failed:\n{done.stderr[-4000:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


@pytest.mark.parametrize("name, must_hold", [
    ("data_loader_tutorial.py", ["orbax_restore_exact", "state_is_bytes", "bytes_resume_exact"]),
    ("dataset_tutorial.py", ["random_access_matches_iteration", "filter_ok", "is_dataset_iterator",
                             "restore_exact", "workers_same_multiset"]),
])
def test_tutorial_runs_the_same_under_grain_and_thresher(tmp_path: Path, name: str, must_hold: list[str]) -> None:
    (tmp_path / "grain").mkdir()
    (tmp_path / "thresher").mkdir()
    ours = _run(TUTORIALS / name, THRESHER_IMPORT, tmp_path / "thresher")
    theirs = _run(TUTORIALS / name, None, tmp_path / "grain")
    for key in must_hold:
        assert ours[key] is True, f"under thresher.grain, {key} is {ours[key]}"
        assert theirs[key] is True, f"under Grain, {key} is {theirs[key]}"
    assert ours == theirs


def test_the_scripts_change_only_the_import_line() -> None:
    for script in TUTORIALS.glob("*.py"):
        first_code = next(line for line in script.read_text().splitlines()
                          if line.startswith(("import ", "from ")))
        assert first_code.endswith("# the line that changes")
        assert "import thresher" not in script.read_text() and "from thresher" not in script.read_text()
