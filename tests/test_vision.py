"""thresher.vision: random-resized crop + flip of JPEGs, full and reduced-scale decode."""

from __future__ import annotations

import io

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

import thresher as th
from thresher.errors import ConfigError, TransformError
from thresher.vision import (
    _reduction,
    decode_random_resized_crop,
    open_jpeg,
    random_resized_crop_box,
    resized_crop_flip,
)


def _photo_jpeg(width: int, height: int, seed: int) -> bytes:
    """A smooth, photo-like JPEG (gradients + blobs), so scaled decodes are comparable."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    img = np.stack([128 + 100 * np.sin(xx / rng.uniform(20, 60) + c) * np.cos(yy / rng.uniform(20, 60))
                    for c in range(3)], axis=-1)
    buf = io.BytesIO()
    Image.fromarray(np.clip(img, 0, 255).astype(np.uint8)).save(buf, "JPEG", quality=90)
    return buf.getvalue()


@given(width=st.integers(1, 3000), height=st.integers(1, 3000), seed=st.integers(0, 2**32))
@settings(max_examples=200, deadline=None)
def test_crop_box_is_inside_the_image_and_a_function_of_the_rng(width: int, height: int, seed: int) -> None:
    box = random_resized_crop_box(width, height, np.random.default_rng(seed))
    left, top, w, h = box
    assert w >= 1 and h >= 1 and 0 <= left and left + w <= width and 0 <= top and top + h <= height
    assert random_resized_crop_box(width, height, np.random.default_rng(seed)) == box


def test_full_decode_equals_the_explicit_pipeline() -> None:
    data = _photo_jpeg(480, 360, 1)
    for seed in range(20):
        rng = np.random.default_rng(seed)
        img = open_jpeg(data)
        box = random_resized_crop_box(*img.size, rng)
        expected = resized_crop_flip(img, box, 224, bool(rng.random() < 0.5))
        got = decode_random_resized_crop(data, np.random.default_rng(seed), reduced=False)
        assert got.shape == (224, 224, 3) and got.dtype == np.uint8
        assert np.array_equal(got, expected)


def test_reduction_only_shrinks() -> None:
    assert _reduction(500, 375, 375, 375, 224) == 1  # ImageNet-sized: a 1/2 decode would upscale
    assert _reduction(2000, 1500, 1000, 800, 224) == 2
    assert _reduction(2000, 1500, 1000, 900, 224) == 4  # 225 pixels at 1/4
    assert _reduction(4000, 3000, 3000, 2000, 224) == 8
    assert _reduction(4000, 3000, 3000, 2000, 1000) == 2
    assert _reduction(4000, 3000, 3000, 2000, 1001) == 1


@pytest.mark.parametrize("backend", ["pillow", "opencv"])
def test_reduced_decode_is_deterministic_and_close_to_the_full_one(backend: str) -> None:
    data = _photo_jpeg(1600, 1200, 2)
    diffs = []
    for seed in range(12):
        a = decode_random_resized_crop(data, np.random.default_rng(seed), size=96, backend=backend)
        b = decode_random_resized_crop(data, np.random.default_rng(seed), size=96, backend=backend)
        full = decode_random_resized_crop(data, np.random.default_rng(seed), size=96, reduced=False,
                                          backend=backend)
        assert a.shape == (96, 96, 3) and a.dtype == np.uint8 and np.array_equal(a, b)
        diffs.append(float(np.abs(a.astype(np.int16) - full).mean()))
    assert max(diffs) < 8.0, diffs  # the same crop, scaled in the DCT instead of the filter


def test_opencv_and_pillow_agree_to_a_few_levels() -> None:
    data = _photo_jpeg(480, 360, 3)
    for seed in range(8):
        a = decode_random_resized_crop(data, np.random.default_rng(seed), backend="pillow")
        b = decode_random_resized_crop(data, np.random.default_rng(seed), backend="opencv")
        assert float(np.abs(a.astype(np.int16) - b).mean()) < 6.0


@pytest.mark.parametrize("backend", ["pillow", "opencv"])
def test_batches_are_identical_for_any_worker_count_and_after_restore(backend: str) -> None:
    records = [_photo_jpeg(int(w), int(h), i) for i, (w, h) in
               enumerate(np.random.default_rng(0).integers([400, 300], [501, 376], size=(24, 2)))]
    source = th.sources.InMemoryDataSource(records)

    def loader(workers: int) -> th.DataLoader:
        def op(data: bytes, rng: np.random.Generator) -> np.ndarray:
            return decode_random_resized_crop(data, rng, size=64, backend=backend)

        return th.DataLoader(source, th.IndexSampler(24, shuffle=True, seed=5, num_epochs=2),
                             [th.RandomMapTransform(op), th.Batch(8)], worker_count=workers)

    runs = {w: [b.copy() for b in loader(w)] for w in (0, 2)}
    assert len(runs[0]) == 6 and all(np.array_equal(a, b) for a, b in zip(runs[0], runs[2]))
    it = iter(loader(0))
    next(it), next(it)
    state = it.get_state()
    it2 = iter(loader(2))
    it2.set_state(state)
    assert all(np.array_equal(a, b) for a, b in zip(list(it2), runs[0][2:]))


def test_bad_inputs_say_what_is_wrong() -> None:
    rng = np.random.default_rng(0)
    with pytest.raises(TransformError, match="cannot read an image from 9 bytes"):
        decode_random_resized_crop(b"not a jpg", rng)
    data = _photo_jpeg(64, 48, 0)
    with pytest.raises(ConfigError, match="size must be an int"):
        decode_random_resized_crop(data, rng, size=0)
    with pytest.raises(ConfigError, match="backend must be"):
        decode_random_resized_crop(data, rng, backend="turbo")
    with pytest.raises(ConfigError, match="scale must satisfy"):
        random_resized_crop_box(10, 10, rng, scale=(0.5, 0.1))
