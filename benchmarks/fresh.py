"""Runs of one loader in a new interpreter, rows interleaved round by round (shared by the fresh-process benchmarks)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def interleaved(template: str, rows: Sequence[tuple[str, str, dict[str, Any]]], rounds: int, data: dict[str, Any],
                timeout_s: float) -> Iterator[tuple[int, str, dict[str, Any]]]:
    """Yields ``(round, row name, result)`` for each run of ``template`` (``python -c``; formatted with
    ``root``, ``module``, ``cfg`` and ``data``; its last stdout line is its JSON result); a failed run
    is printed and skipped."""
    for r in range(rounds):
        for name, module, cfg in rows:
            code = template.format(root=ROOT, module=module, cfg=cfg, data=data)
            out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout_s)
            if out.returncode != 0:
                print(f"  [{r + 1}] {name}: failed: {out.stderr[-600:]}")
                continue
            yield r, name, json.loads(out.stdout.strip().splitlines()[-1])
