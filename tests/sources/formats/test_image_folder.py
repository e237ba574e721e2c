"""ImageFolderSource: torchvision's order, bytes as stored, errors naming the file, engine promises."""

from __future__ import annotations

import io
import os
import pickle

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image

import thresher as th
from tests.sources.formats.engine import check_fresh_resume, check_small_pickle, check_worker_counts, loader
from thresher.errors import CorruptSourceError, SourceError, SourceNotFoundError
from thresher.sources.formats.image_folder import IMG_EXTENSIONS, decode_image


def _image(fmt: str, seed: int, size: tuple[int, int] = (10, 7)) -> bytes:
    rng = np.random.default_rng(seed)
    buf = io.BytesIO()
    Image.fromarray(rng.integers(0, 255, (size[1], size[0], 3), np.uint8)).save(buf, fmt)
    return buf.getvalue()


def _write(root: str, rel: str, data: bytes) -> str:
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    return path


def torchvision_order(root: str) -> list[tuple[str, int]]:
    """torchvision's ImageFolder samples as its documentation states them, computed another way:
    classes are sorted directory names; samples sort by (class, directory path, file name),
    which is what sorting os.walk's tuples and then each directory's names gives."""
    classes = sorted(e for e in os.listdir(root) if os.path.isdir(os.path.join(root, e)))
    found = []
    for c, name in enumerate(classes):
        for dirpath, _, files in os.walk(os.path.join(root, name), followlinks=True):
            for f in files:
                if f.lower().endswith(IMG_EXTENSIONS):
                    found.append((c, dirpath, f))
    return [(os.path.join(d, f), c) for c, d, f in sorted(found)]


_names = st.sampled_from(["a", "a-b", "a.b", "B", "b", "_c", ".hidden", "z9", "a_"])
_SIGNATURE = {".jpg": b"\xff\xd8\xff", ".jpeg": b"\xff\xd8\xff", ".png": b"\x89PNG\r\n\x1a\n",
              ".webp": b"RIFF\0\0\0\0WEBP", ".bmp": b"BM", ".tif": b"II*\0"}
_files = st.sampled_from(["x.jpg", "y.JPEG", "a.png", "b.txt", "c.webp", "0.bmp", "d.Tif", "e"])


@given(layout=st.lists(st.tuples(_names, st.lists(_names, max_size=2), _files), min_size=1, max_size=25))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_order_is_torchvisions(tmp_path_factory: pytest.TempPathFactory, layout: list) -> None:
    root = str(tmp_path_factory.mktemp("folder"))
    for cls, subdirs, fname in layout:
        _write(root, os.path.join(cls, *subdirs, fname), _SIGNATURE.get(os.path.splitext(fname)[1].lower(), b"?"))
    want = torchvision_order(root)
    classes = sorted(e for e in os.listdir(root) if os.path.isdir(os.path.join(root, e)))
    empty = [c for i, c in enumerate(classes) if not any(label == i for _, label in want)]
    if empty:
        with pytest.raises(SourceNotFoundError, match="hold no image"):
            th.sources.ImageFolderSource(root)
        src = th.sources.ImageFolderSource(root, allow_empty=True) if want else None
    else:
        src = th.sources.ImageFolderSource(root)
    if src is None:
        return
    assert src.class_names == classes
    assert [(r["path"], r["label"]) for r in src.__getitems__(range(len(src)))] == want
    assert [(src[k]["path"], src[k]["label"]) for k in range(len(src))] == want


def test_records_are_the_bytes_as_stored(tmp_path: str) -> None:
    root = str(tmp_path)
    jpg, png = _image("JPEG", 1), _image("PNG", 2)
    _write(root, "cat/1.jpg", jpg)
    _write(root, "dog/1.png", png)
    src = th.sources.ImageFolderSource(root)
    assert src[0] == {"image": jpg, "label": 0, "path": os.path.join(root, "cat", "1.jpg")}
    assert src[1]["image"] == png and src.class_to_idx == {"cat": 0, "dog": 1}
    assert decode_image(src[1]).shape == (7, 10, 3)
    decoded = th.sources.ImageFolderSource(root, decode=True)
    assert np.array_equal(decoded[1]["image"], np.asarray(Image.open(io.BytesIO(png)).convert("RGB")))
    assert src.record_locations([1]) == [(os.path.join(root, "dog", "1.png"), 0)]
    assert src.block_boundaries().tolist() == [0, 1]


def test_bad_images_name_their_file(tmp_path: str) -> None:
    root = str(tmp_path)
    _write(root, "a/ok.jpg", _image("JPEG", 0))
    empty = _write(root, "a/empty.jpg", b"")
    html = _write(root, "a/page.png", b"<html>not found</html>")
    cut = _write(root, "a/truncated.jpg", _image("JPEG", 3, (64, 64))[:300])
    src = th.sources.ImageFolderSource(root)
    for k, path in enumerate(src.paths):
        if path in (empty, html):
            with pytest.raises(CorruptSourceError, match=os.path.basename(path)):
                src[k]
    k = src.paths.index(cut)
    assert src[k]["image"][:3] == b"\xff\xd8\xff"  # bytes as stored: decoding finds the damage
    with pytest.raises(CorruptSourceError, match=r"truncated\.jpg"):
        decode_image(src[k])
    with pytest.raises(CorruptSourceError, match=r"truncated\.jpg"):
        th.sources.ImageFolderSource(root, decode=True)[k]
    os.chmod(html, 0)
    if not os.access(html, os.R_OK):  # root reads anything
        with pytest.raises(SourceError, match=r"page\.png"):
            src[src.paths.index(html)]
    os.chmod(html, 0o644)


def test_skip_drops_bad_images_the_same_for_every_worker_mode(tmp_path: str) -> None:
    root = str(tmp_path)
    for i in range(14):
        _write(root, f"c{i % 3}/{i:02d}.jpg", _image("JPEG", i) if i % 5 else b"GIF89a")
    args = {"root": root}
    want = None
    for workers, mode in [(0, "process"), (2, "thread"), (2, "process")]:
        it = iter(loader("image_folder", args, workers, mode, errors="skip"))
        got = [b.tobytes() for b in it]
        skipped = sorted({(d.file, d.record_key) for d in it.skipped_records})
        assert len(skipped) == 3 and all(f.endswith(".jpg") and "GIF" not in f for f, _ in skipped)
        if want is None:
            want = (got, skipped)
        assert (got, skipped) == want


def test_engine_promises(tmp_path: str) -> None:
    root = str(tmp_path)
    for i in range(11):
        _write(root, f"k{i % 4}/{i}.png", _image("PNG", i, (4, 4)))
    check_worker_counts("image_folder", {"root": root})
    check_fresh_resume("image_folder", {"root": root}, stop=3)
    check_small_pickle(th.sources.ImageFolderSource(root), limit=600)


def test_a_changed_folder_is_refused_after_unpickling(tmp_path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    root = str(tmp_path / "data")
    for i in range(3):
        _write(root, f"k/{i}.png", _image("PNG", i, (2, 2)))
    blob = pickle.dumps(th.sources.ImageFolderSource(root))
    _write(root, "k/9.png", _image("PNG", 9, (2, 2)))
    monkeypatch.setenv("THRESHER_CACHE_DIR", str(tmp_path / "other-cache"))  # a worker on another machine
    with pytest.raises(SourceError, match="changed"):
        pickle.loads(blob)


def test_folder_without_classes_is_refused(tmp_path: str) -> None:
    _write(str(tmp_path), "loose.jpg", b"\xff\xd8\xff")
    with pytest.raises(th.errors.ConfigError, match="no class subfolders"):
        th.sources.ImageFolderSource(str(tmp_path))
    with pytest.raises(SourceNotFoundError):
        th.sources.ImageFolderSource(str(tmp_path / "nope"))
