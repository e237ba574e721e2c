"""The documentation site (MkDocs, API pages from the docstrings) builds with warnings as errors."""

from __future__ import annotations

import subprocess
import sys

from tests.docs.markdown_files import REPO


def test_mkdocs_build_strict(tmp_path) -> None:
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    api = (tmp_path / "site" / "api" / "index.html").read_text(encoding="utf-8")
    # The API page is generated from the docstrings, examples rendered as code.
    assert "DataLoaderIterator" in api and "IndexSampler" in api and "&gt;&gt;&gt;" in api
