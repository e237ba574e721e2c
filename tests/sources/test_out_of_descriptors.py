"""A process with no descriptor left gets a SourceError that says so and what to do, from every
local source, when it opens a file it has not opened yet: never "corrupt" (array_record's reader
only says it failed, and its file was called corrupt)."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import numpy as np
from PIL import Image

import thresher as th
from tests.helpers import without_descriptors
from thresher.sources.formats.tfrecord.framing import frame_record


def test_every_local_source_says_it_ran_out_of_descriptors(tmp_path: Path) -> None:
    d = str(tmp_path)
    th.sources.write_array_record(f"{d}/a.array_record", [b"x", b"y"])
    th.sources.write_array_record(f"{d}/b.array_record", [b"z"])
    os.makedirs(f"{d}/img/cat")
    for i in range(2):
        Image.fromarray(np.zeros((4, 4, 3), np.uint8)).save(f"{d}/img/cat/{i}.jpg")
    with open(f"{d}/t.tfrecord", "wb") as f:
        f.write(frame_record(b"a") + frame_record(b"b"))
    with tarfile.open(f"{d}/s.tar", "w") as tar:
        for j in range(2):
            info = tarfile.TarInfo(f"k{j}.txt")
            info.size = 1
            tar.addfile(info, io.BytesIO(b"v"))
    setup = "\n".join([  # every module imported, one file of each opened, then the others are asked for
        f"ar = th.sources.ArrayRecordSource([{d + '/a.array_record'!r}, {d + '/b.array_record'!r}]); ar[0]",
        f"img = th.sources.ImageFolderSource({d + '/img'!r}); img[0]",
        f"th.sources.TFRecordSource({d + '/t.tfrecord'!r})[0]; tf = th.sources.TFRecordSource({d + '/t.tfrecord'!r})",
        f"th.sources.WebDatasetSource({d + '/s.tar'!r})[0]; wds = th.sources.WebDatasetSource({d + '/s.tar'!r})",
    ])
    steps = ["ar[2]", "img[1]", "tf[1]", "wds[1]"]
    assert without_descriptors(setup, steps) == ["SourceError", "True", "True"] * len(steps)
