"""Every link of README.md and docs/ resolves inside the repository, anchors included, and
every docs path the code names exists."""

from __future__ import annotations

import os
import re

import pytest

from tests.docs.markdown_files import REPO, anchors, links, markdown_files

EXTERNAL = ("http://", "https://", "mailto:")


def _relative_links() -> list[tuple[str, int, str]]:
    return [(rel, n, target) for rel in markdown_files() for n, target in links(rel)
            if not target.startswith(EXTERNAL)]


@pytest.mark.parametrize("rel,line,target", _relative_links(),
                         ids=[f"{r}:{n}:{t}" for r, n, t in _relative_links()])
def test_relative_link_resolves(rel: str, line: int, target: str) -> None:
    path, _, anchor = target.partition("#")
    here = os.path.dirname(os.path.join(REPO, rel))
    resolved = os.path.normpath(os.path.join(here, path)) if path else os.path.join(REPO, rel)
    assert os.path.commonpath([resolved, REPO]) == REPO, f"{rel}:{line}: {target} leaves the repository"
    assert os.path.exists(resolved), f"{rel}:{line}: {target} does not exist"
    if anchor and resolved.endswith(".md"):
        have = anchors(os.path.relpath(resolved, REPO))
        assert anchor in have, f"{rel}:{line}: no heading of {path or rel} has the anchor #{anchor}"


def test_documents_have_links() -> None:
    # The check above must have something to check: the README links its guides.
    assert any(rel == "README.md" and t.startswith("docs/") for rel, _, t in _relative_links())


def _sources() -> list[str]:
    out = []
    for top in ("thresher", "benchmarks", "tests", ".ci"):
        for root, _, files in os.walk(os.path.join(REPO, top)):
            if root.startswith(os.path.join(REPO, "tests", "docs")):
                continue  # these tests' own fixtures name made-up pages
            out += [os.path.join(root, f) for f in files if f.endswith((".py", ".md", ".txt")) or f == "run"]
    return out + [os.path.join(REPO, "README.md"), os.path.join(REPO, "mkdocs.yml")]


def test_docs_paths_named_in_code_exist() -> None:
    missing = []
    for path in _sources():
        with open(path, encoding="utf-8", errors="replace") as f:
            for n, line in enumerate(f, start=1):
                for m in re.finditer(r"(?<![\w/.])docs/[\w./-]+\.(?:md|png)", line):
                    if not os.path.exists(os.path.join(REPO, m.group(0))):
                        missing.append(f"{os.path.relpath(path, REPO)}:{n}: {m.group(0)}")
                if "DESIGN.md" in line:
                    missing.append(f"{os.path.relpath(path, REPO)}:{n}: DESIGN.md (the architecture "
                                   "is docs/architecture.md)")
    assert not missing, "\n".join(missing)
