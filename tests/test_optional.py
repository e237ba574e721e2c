"""A missing optional dependency is a MissingExtraError that names ``pip install "thresher[extra]"``.

The package is made missing the way Python itself honours: ``sys.modules[name] = None`` makes
``import name`` raise ModuleNotFoundError (restored after each test). Module-level imports
(thresher.beam, the Orbax checkpoint modules) are checked in a fresh interpreter.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

import thresher as th
from thresher.errors import MissingExtraError

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _show(tmp: str) -> Any:
    from thresher.features import FeaturesDict, Image
    from thresher.sources import InMemoryDataSource

    src = InMemoryDataSource([{"image": np.zeros((2, 2, 1), np.uint8)}] * 2)
    info = SimpleNamespace(name="x", features=FeaturesDict({"image": Image((2, 2, 1))}))
    return th.show_examples(src, info, 1, 1, path=os.path.join(tmp, "x.png"))


def _timeline(tmp: str) -> Any:
    from thresher.loader.profiling.timeline import plot_timeline

    return plot_timeline({"traceEvents": []}, os.path.join(tmp, "t.png"))


def _dataframe(tmp: str) -> Any:
    from thresher.sources import InMemoryDataSource

    return th.as_dataframe(InMemoryDataSource([{"a": 1}]))


def _vision(tmp: str) -> Any:
    from thresher.vision import open_jpeg

    return open_jpeg(b"\xff\xd8")


def _opencv(tmp: str) -> Any:
    import io

    from PIL import Image

    from thresher.vision import decode_random_resized_crop

    buf = io.BytesIO()
    Image.new("RGB", (32, 32)).save(buf, "JPEG")
    return decode_random_resized_crop(buf.getvalue(), np.random.default_rng(0), size=8, backend="opencv")


def _image_backend(tmp: str) -> Any:
    from thresher.features.image_codecs import decode_image

    return decode_image(b"\x89PNG", 3, backend="pil")


def _decompress(kind: str) -> Any:
    import threading

    import pytest

    from thresher.sources.remote import compression

    with pytest.MonkeyPatch.context() as m:  # what an earlier read loaded is forgotten
        m.setattr(compression, "_MODULES", {})
        m.setattr(compression, "_ZSTD", threading.local())
        return compression.decompress(getattr(compression, kind), b"x")


def _cramjam(tmp: str) -> Any:
    return _decompress("BROTLI")


def _zstandard(tmp: str) -> Any:
    return _decompress("ZSTD")


def _fsspec(tmp: str) -> Any:
    from thresher.sources.remote.fs import filesystem

    return filesystem("memory://bucket/x")


def _botocore(tmp: str) -> Any:
    from thresher.sources.remote.lean_config import _find_credentials

    return _find_credentials(None)


def _jax_split(tmp: str) -> Any:
    return th.split_for_jax_process("train")


def _jax_shard(tmp: str) -> Any:
    return th.ShardByJaxProcess()


def _digits(tmp: str) -> Any:
    from thresher.demo.digits import write_digits

    return write_digits(tmp)


CASES: list[tuple[str, str, Callable[[str], Any]]] = [
    ("matplotlib.figure", "plot", _show),
    ("matplotlib.figure", "plot", _timeline),
    ("pandas", "pandas", _dataframe),
    ("PIL.Image", "images", _vision),
    ("cv2", "opencv", _opencv),
    ("PIL.Image", "images", _image_backend),
    ("cramjam", "remote", _cramjam),
    ("zstandard", "remote", _zstandard),
    ("fsspec.core", "remote", _fsspec),
    ("botocore.session", "remote", _botocore),
    ("jax", "jax", _jax_split),
    ("jax", "jax", _jax_shard),
    ("sklearn.datasets", "demo", _digits),
]


@pytest.mark.parametrize(("module", "extra", "call"), CASES, ids=[f"{m}-{c.__name__}" for m, _, c in CASES])
def test_a_missing_extra_names_its_pip_install(module: str, extra: str, call: Callable[[str], Any],
                                               monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(MissingExtraError, match=rf'pip install "thresher\[{extra}\]"') as e:
        call(str(tmp_path))
    assert isinstance(e.value, ModuleNotFoundError) and e.value.name == module


BLOCKED_IMPORT = """
import sys
for name in sys.argv[2].split(","):
    sys.modules[name] = None
try:
    exec(sys.argv[1])
except ModuleNotFoundError as e:
    print(type(e).__name__, e)
"""


@pytest.mark.parametrize(("blocked", "code", "extra"), [
    ("apache_beam", "import thresher.beam", "beam"),
    ("orbax,orbax.checkpoint", "import thresher.jax.checkpoint", "orbax"),
    ("orbax,orbax.checkpoint", "import thresher.grain as g; g.PyGrainCheckpointSave", "orbax"),
])
def test_a_module_that_needs_an_extra_names_it(blocked: str, code: str, extra: str) -> None:
    env = dict(os.environ, PYTHONPATH=REPO)
    out = subprocess.run([sys.executable, "-c", BLOCKED_IMPORT, code, blocked], capture_output=True, text=True,
                         env=env, timeout=120)
    assert out.stdout.startswith("MissingExtraError "), out.stdout + out.stderr
    assert f'pip install "thresher[{extra}]"' in out.stdout


def test_every_extra_named_exists() -> None:
    import tomllib

    from thresher._optional import EXTRAS

    with open(os.path.join(REPO, "pyproject.toml"), "rb") as f:
        extras = tomllib.load(f)["project"]["optional-dependencies"]
    assert set(EXTRAS.values()) <= set(extras)
