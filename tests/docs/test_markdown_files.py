"""The Markdown parsing the docs tests rely on: fences, the not-run marker, links, anchors."""

from __future__ import annotations

from tests.docs import markdown_files as mf


def test_blocks_markers_and_links(tmp_path, monkeypatch) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text(
        "# Title `x`\n\nSee [a](docs/a.md#the-part) and `[not](a link)`.\n\n"
        "```python\nprint(1)\n```\n\n<!-- not-run: needs a bucket -->\n```python\nimport gcs\n```\n"
        "- item\n\n  ```python\n  x = 1\n  ```\n```json\n{}\n```\n")
    (tmp_path / "docs" / "a.md").write_text("## The part\n")
    monkeypatch.setattr(mf, "REPO", str(tmp_path))
    assert mf.markdown_files() == ["README.md", "docs/a.md"]
    got = [(b.line, b.code, b.not_run) for b in mf.python_blocks()]
    assert got == [(5, "print(1)\n", None), (10, "import gcs\n", "needs a bucket"), (15, "x = 1\n", None)]
    assert mf.links("README.md") == [(3, "docs/a.md#the-part")]
    assert "the-part" in mf.anchors("docs/a.md") and "title-x" in mf.anchors("README.md")
