"""The repository's Markdown documents and the pieces the docs tests check in them.

``python_blocks`` finds fenced ```python blocks (also indented ones inside list items) and
the ``<!-- not-run: reason -->`` marker on the line directly above a fence; ``links`` finds
Markdown links and images. Both keep the line number, so a failure names file:line.
"""

from __future__ import annotations

import os
import re
import textwrap
from dataclasses import dataclass

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

NOT_RUN = re.compile(r"^\s*<!--\s*not-run:\s*(?P<reason>\S.*?)\s*-->\s*$")
FENCE_OPEN = re.compile(r"^(?P<indent>\s*)(?P<fence>```+|~~~+)\s*(?P<lang>[\w+-]*)")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\((?P<target><[^>]*>|[^()\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^(#{1,6})\s+(?P<title>.+?)\s*#*\s*$")


def markdown_files() -> list[str]:
    """README.md and every Markdown page under docs/, as paths relative to the repository."""
    found = ["README.md"]
    for root, _, files in os.walk(os.path.join(REPO, "docs")):
        found += sorted(os.path.relpath(os.path.join(root, f), REPO) for f in files if f.endswith(".md"))
    return found


def read(rel: str) -> list[str]:
    with open(os.path.join(REPO, rel), encoding="utf-8") as f:
        return f.read().splitlines()


@dataclass(frozen=True)
class Block:
    """A fenced code block: where it is, its language, its code (dedented), a not-run reason."""

    file: str
    line: int
    lang: str
    code: str
    not_run: str | None

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"


def blocks(rel: str) -> list[Block]:
    """Every fenced code block of one Markdown file, in order."""
    lines = read(rel)
    out: list[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE_OPEN.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence = m.group("indent"), m.group("fence")
        end = i + 1
        while end < len(lines) and not lines[end].strip().startswith(fence):
            end += 1
        body = [ln[len(indent):] if ln.startswith(indent) else ln.lstrip() for ln in lines[i + 1:end]]
        above = NOT_RUN.match(lines[i - 1]) if i > 0 else None
        out.append(Block(rel, i + 1, m.group("lang").lower(), textwrap.dedent("\n".join(body)) + "\n",
                         above.group("reason") if above else None))
        i = end + 1
    return out


def python_blocks() -> list[Block]:
    """The ```python blocks of README.md and docs/."""
    return [b for rel in markdown_files() for b in blocks(rel) if b.lang == "python"]


def outside_code(rel: str) -> list[tuple[int, str]]:
    """(line number, text) of the lines of a Markdown file that are not inside a fenced block."""
    lines = read(rel)
    out: list[tuple[int, str]] = []
    fence: str | None = None
    for n, ln in enumerate(lines, start=1):
        m = FENCE_OPEN.match(ln)
        if fence is None and m:
            fence = m.group("fence")
        elif fence is not None and ln.strip().startswith(fence):
            fence = None
        elif fence is None:
            out.append((n, ln))
    return out


def links(rel: str) -> list[tuple[int, str]]:
    """(line number, target) of every Markdown link and image outside code."""
    found = []
    for n, ln in outside_code(rel):
        text = re.sub(r"`[^`]*`", "", ln)  # a link inside inline code is text
        found += [(n, m.group("target").strip("<>")) for m in LINK.finditer(text)]
    return found


def slugs(title: str) -> set[str]:
    """The anchors GitHub and MkDocs give a heading (they differ on runs of spaces and '-')."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", title).replace("`", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return {text.replace(" ", "-"), re.sub(r"[-\s]+", "-", text).strip("-")}


def anchors(rel: str) -> set[str]:
    """The anchors of a Markdown file's headings."""
    found: set[str] = set()
    for _, ln in outside_code(rel):
        m = HEADING.match(ln)
        if m:
            found |= slugs(m.group("title"))
    return found
