"""Runs of one loader in a new interpreter, rows interleaved round by round (shared by the fresh-process benchmarks)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def as_script(code: str) -> str:
    """``code`` as a user writes a training script: its leading imports at the top level, the
    rest under ``if __name__ == "__main__":`` (worker processes import the script again)."""
    lines = code.strip("\n").splitlines()
    top = 0
    while top < len(lines) and lines[top].startswith("import "):
        top += 1
    body = "\n".join("    " + line if line else line for line in lines[top:])
    return "\n".join(lines[:top]) + '\n\nif __name__ == "__main__":\n' + body + "\n"


def interleaved(template: str, rows: Sequence[tuple[str, str, dict[str, Any]]], rounds: int, data: dict[str, Any],
                timeout_s: float) -> Iterator[tuple[int, str, dict[str, Any]]]:
    """Yields ``(round, row name, result)`` for each run of ``template`` (formatted with ``root``,
    ``module``, ``cfg`` and ``data``, run as a script file, as users run them: ``as_script``; its last
    stdout line is its JSON result); a failed run is printed and skipped."""
    with tempfile.TemporaryDirectory(prefix="thresher-fresh-") as tmp:
        yield from _interleaved(template, rows, rounds, data, timeout_s, os.path.join(tmp, "child.py"))


def _interleaved(template: str, rows: Sequence[tuple[str, str, dict[str, Any]]], rounds: int, data: dict[str, Any],
                 timeout_s: float, script: str) -> Iterator[tuple[int, str, dict[str, Any]]]:
    for r in range(rounds):
        for name, module, cfg in rows:
            with open(script, "w") as f:
                f.write(as_script(template.format(root=ROOT, module=module, cfg=cfg, data=data)))
            out = subprocess.run([sys.executable, script], capture_output=True, text=True, timeout=timeout_s)
            if out.returncode != 0:
                print(f"  [{r + 1}] {name}: failed: {out.stderr[-600:]}")
                continue
            yield r, name, json.loads(out.stdout.strip().splitlines()[-1])
