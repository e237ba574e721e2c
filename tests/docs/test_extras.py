"""A code block that needs an optional extra says so, in the block or just above it.

After the README's ``pip install thresher`` a block that imports JAX, Orbax, pandas, ... fails with
a bare ``ModuleNotFoundError`` unless the reader was told which extra to install. What a block
needs is read from what it uses (below); it must name ``thresher[extra]`` (``pip install
"thresher[jax]"``, or ``thresher[jax,orbax]``) in its code or in the 5 lines above its fence.
"""

from __future__ import annotations

import re

import pytest

from tests.docs import markdown_files as mf

# what a block uses -> the extra it needs
NEEDS = [
    (r"^\s*(import|from) jax\b|\bthresher\.jax\b|\bth\.jax\b|global_batches|make_global_batch|ShardByJaxProcess\(",
     "jax"),
    (r"\borbax\b|grain\.checkpoint|PyGrainCheckpoint|CheckpointSave|CheckpointRestore", "orbax"),
    (r"^\s*(import|from) torch\b", "torch"),
    (r"as_dataframe|^\s*(import|from) pandas\b", "pandas"),
    (r"show_examples|plot_timeline|matplotlib", "plot"),
    (r"thresher\.vision|\bth\.vision|^\s*(import|from) PIL\b", "images"),
    (r"^\s*import cv2\b|backend=['\"]opencv", "opencv"),
    (r"thresher\.beam|\bth\.beam\b|apache_beam", "beam"),
    (r"\b(s3|gs)://|^\s*(import|from) (fsspec|s3fs|gcsfs)\b", "remote"),
    (r"thresher\.demo\b|sklearn", "demo"),
]
# an extra that brings another's packages
COVERS = {"orbax": {"jax"}, "demo": {"jax", "orbax"}, "test": {n for _, n in NEEDS}}
NAMED = re.compile(r"thresher\[([\w,\s-]+)\]")

RUN = [b for b in mf.python_blocks() if b.not_run is None]


def needs(code: str) -> set[str]:
    return {extra for pattern, extra in NEEDS if re.search(pattern, code, re.M)}


def named(block: mf.Block) -> set[str]:
    text = "\n".join(mf.read(block.file)[max(0, block.line - 6):block.line - 1]) + "\n" + block.code
    found = {e.strip() for m in NAMED.finditer(text) for e in m.group(1).split(",")}
    return found | {c for e in found for c in COVERS.get(e, ())}


@pytest.mark.parametrize("block", RUN, ids=[b.where for b in RUN])
def test_a_block_names_the_extras_it_needs(block: mf.Block) -> None:
    missing = needs(block.code) - named(block)
    assert not missing, (f"{block.where} needs {sorted(missing)}: say so in the block or just above it, e.g. "
                         f"'Needs `pip install \"thresher[{','.join(sorted(missing))}]\"`.'")


def test_the_reader_of_uses_is_right() -> None:
    assert needs("import jax\nimport thresher.jax\n") == {"jax"}
    assert needs("th.data_source('gs://bucket/ds')\ndf = th.as_dataframe(ds)\n") == {"remote", "pandas"}
    assert needs("import thresher as th\nth.DataLoader(src, sampler, [th.Batch(2)])\n") == set()
