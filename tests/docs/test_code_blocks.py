"""Every ```python block of README.md and docs/ runs as written.

Each block runs alone, in a fresh temporary directory, in a fresh Python process, with a
timeout; a block that starts with ``>>>`` runs as a doctest (its printed outputs are checked).
Only a block with ``<!-- not-run: reason -->`` on the line directly above its fence is skipped
(it is not collected at all, so the suite shows no skips).
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.docs.markdown_files import Block, python_blocks

TIMEOUT_S = 300

DOCTEST_RUNNER = """\
import doctest, sys
text = open(sys.argv[1], encoding="utf-8").read()
test = doctest.DocTestParser().get_doctest(text, {"__name__": "__main__"}, sys.argv[2], sys.argv[2], 0)
runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
runner.run(test)
sys.exit(1 if runner.failures else 0)
"""

RUN = [b for b in python_blocks() if b.not_run is None]


def _run(block: Block, cwd: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONUNBUFFERED="1", MPLBACKEND="Agg")
    with open(os.path.join(cwd, "block.py"), "w", encoding="utf-8") as f:
        f.write(block.code)
    if block.code.lstrip().startswith(">>>"):
        with open(os.path.join(cwd, "run_doctest.py"), "w", encoding="utf-8") as f:
            f.write(DOCTEST_RUNNER)
        cmd = [sys.executable, "run_doctest.py", "block.py", block.where]
    else:
        cmd = [sys.executable, "block.py"]
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=TIMEOUT_S,
                          stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("block", RUN, ids=[b.where for b in RUN])
def test_block_runs_as_written(block: Block, tmp_path) -> None:
    proc = _run(block, str(tmp_path))
    assert proc.returncode == 0, (f"{block.where} failed (exit {proc.returncode}):\n{block.code}\n"
                                  f"--- stdout\n{proc.stdout[-4000:]}\n--- stderr\n{proc.stderr[-6000:]}")


def test_blocks_are_found_and_most_run() -> None:
    blocks = python_blocks()
    assert len(blocks) >= 10 and any(b.file == "README.md" for b in RUN)
    assert len(RUN) >= 0.75 * len(blocks), [b.where for b in blocks if b.not_run]


def test_a_failing_block_fails(tmp_path) -> None:
    # The harness itself: a block that raises, and a doctest whose output is wrong, fail.
    bad = Block("x.md", 1, "python", "raise SystemExit(3)\n", None)
    assert _run(bad, str(tmp_path)).returncode == 3
    wrong = Block("x.md", 1, "python", ">>> 1 + 1\n3\n", None)
    assert _run(wrong, str(tmp_path)).returncode == 1
    right = Block("x.md", 1, "python", ">>> 1 + 1\n2\n", None)
    assert _run(right, str(tmp_path)).returncode == 0
