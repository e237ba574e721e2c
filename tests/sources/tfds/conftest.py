from __future__ import annotations

import os
import shutil
from typing import Callable

import pytest

from tests.sources.tfds.expected import DATA


@pytest.fixture
def copy_fixture(tmp_path: str) -> Callable[[str], str]:
    """Copies a TFDS fixture's newest version directory to a temporary place."""

    def make(name: str) -> str:
        src = os.path.join(DATA, name)
        version = max(os.listdir(src))
        dst = os.path.join(str(tmp_path), name, version)
        shutil.copytree(os.path.join(src, version), dst)
        return dst

    return make
