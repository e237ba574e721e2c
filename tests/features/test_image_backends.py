"""OpenCV and Pillow decode PNGs to the same RGB(A) pixels (both are in the test extra)."""

from __future__ import annotations

import numpy as np
import pytest

from thresher.features.image_codecs import decode_image, encode_image

import PIL  # noqa: E402,F401


def picture(channels: int) -> np.ndarray:
    y, x = np.mgrid[0:12, 0:10]
    planes = [x * 20, y * 15, (x + y) * 9, 255 - x * 7][:channels]
    return np.stack(planes, axis=-1).astype(np.uint8)


@pytest.mark.parametrize("channels", [1, 3, 4])
def test_png_backends_agree(channels):
    import cv2  # noqa: F401
    img = picture(channels)
    for enc in ("cv2", "pil"):
        data = encode_image(img, "png", backend=enc)
        for dec in ("cv2", "pil"):
            np.testing.assert_array_equal(decode_image(data, channels, backend=dec), img,
                                          err_msg=f"encode {enc} decode {dec}")


def test_jpeg_backends_are_close():
    import cv2  # noqa: F401
    img = picture(3)
    data = encode_image(img, "jpeg", backend="pil")
    a = decode_image(data, 3, backend="cv2").astype(int)
    b = decode_image(data, 3, backend="pil").astype(int)
    assert np.abs(a - b).max() <= 4


def test_unknown_or_missing_backend():
    from thresher.errors import ConfigError

    with pytest.raises(ConfigError):
        decode_image(b"", 3, backend="imageio")
