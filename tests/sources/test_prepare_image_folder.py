"""``thresher prepare`` from an image folder keeps file bytes as they are and names a bad file."""

from __future__ import annotations

import io
import os

import numpy as np
import pytest
from PIL import Image

import thresher as th
from thresher.cli import main
from thresher.errors import FeatureError


def _jpeg(seed: int) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(np.random.default_rng(seed).integers(0, 255, (40, 50, 3), np.uint8)).save(buf, "JPEG")
    return buf.getvalue()


def _folder(root: str, files: dict[str, bytes]) -> None:
    for rel, data in files.items():
        os.makedirs(os.path.join(root, os.path.dirname(rel)), exist_ok=True)
        with open(os.path.join(root, rel), "wb") as f:
            f.write(data)


def test_jpegs_are_kept_byte_for_byte_by_default(tmp_path: str) -> None:
    src = str(tmp_path / "photos")
    files = {f"{c}/{i}.jpg": _jpeg(i) for i, c in enumerate(["cat", "dog", "cat", "dog"])}
    _folder(src, files)
    out = str(tmp_path / "kept")
    assert main(["prepare", out, "--split", "train", src, "--quiet", "--no-shuffle"]) == 0
    info = th.builder(out).info
    assert info.features["image"].encoding == "original"
    ds = th.data_source(out, split="train")
    for k in range(len(ds)):
        rel = ds[k]["filename"]
        want = np.asarray(Image.open(io.BytesIO(files[rel])).convert("RGB"))
        assert np.array_equal(ds[k]["image"], want)
        assert files[rel] in ds.raw(k)  # the JPEG's own bytes, not a re-encoding
    png = str(tmp_path / "png")
    assert main(["prepare", png, "--split", "train", src, "--quiet", "--image-encoding", "png"]) == 0
    ds = th.data_source(png, split="train")
    assert not any(files[ds[k]["filename"]] in ds.raw(k) for k in range(len(ds)))  # re-encoded when asked


def test_a_bad_image_is_named(tmp_path: str, capsys: pytest.CaptureFixture) -> None:
    src = str(tmp_path / "photos")
    _folder(src, {"cat/ok.jpg": _jpeg(0), "dog/broken.jpg": _jpeg(1)[:200]})
    assert main(["prepare", str(tmp_path / "out"), "--split", "train", src, "--quiet"]) != 0
    assert os.path.join("dog", "broken.jpg") in capsys.readouterr().err
    with pytest.raises(FeatureError, match=r"broken\.jpg"):
        th.prepare(str(tmp_path / "out2"), {"train": [{"image": os.path.join(src, "dog", "broken.jpg")}]},
                   features={"image": th.features.Image(encoding="original")}, progress=False)
