"""A data file deleted or truncated while an epoch reads it: every batch that arrives is the
batch the intact file gives, and what cannot be read is a thresher error naming the file,
within seconds, with no worker left behind."""

from __future__ import annotations

import os
import time
from typing import Any, Callable

import numpy as np
import pytest

import thresher as th
from tests.loader.leaks import leak_check
from thresher.errors import ThresherError

N = 3000


def _write(path: str) -> str:
    th.sources.write_array_record(path, (np.full(64, i % 251, np.uint8).tobytes() + i.to_bytes(4, "little")
                                         for i in range(N)))
    return path


def _decode(record: bytes) -> dict[str, Any]:
    return {"x": np.frombuffer(record[:64], np.uint8), "key": int.from_bytes(record[64:], "little")}


def _loader(path: str, workers: int) -> th.DataLoader:
    source = th.sources.ArrayRecordSource(path)
    return th.DataLoader(source, th.IndexSampler(N, shuffle=True, seed=5, num_epochs=2), [_decode, th.Batch(50)],
                         worker_count=workers, chunk_size=100, worker_buffer_size=1)


def _delete(path: str) -> None:
    os.remove(path)


def _truncate(path: str) -> None:
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) // 3)


def _replace_with_garbage(path: str) -> None:
    with open(path, "r+b") as f:
        size = os.path.getsize(path)
        f.seek(size // 4)
        f.write(os.urandom(size // 2))


@pytest.mark.usefixtures("_helpers_started")
@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("damage", [_delete, _truncate, _replace_with_garbage], ids=lambda f: f.__name__[1:])
def test_a_file_changed_under_a_running_epoch(tmp_path, workers: int, damage: Callable[[str], None]) -> None:
    reference = [b["key"].tolist() for b in _loader(_write(str(tmp_path / "ref.array_record")), 0)]
    path = _write(str(tmp_path / "data.array_record"))
    got: list[list[int]] = []
    error: str | None = None  # the text only: a kept exception would keep the reader's frames open
    with leak_check(timeout=5.0):
        it = iter(_loader(path, workers))
        start = time.monotonic()
        try:
            for i, batch in enumerate(it):
                got.append(batch["key"].tolist())
                if i == 5:
                    damage(path)
        except ThresherError as e:
            error = f"{e} (cause: {e.__cause__})"
        finally:
            it.close()
        assert time.monotonic() - start < 60, "the damaged file made the loader hang"
        del it
    # Whatever arrived is exactly what the intact file gives, in order: no silent wrong data.
    assert got == reference[:len(got)]
    if error is None:
        assert len(got) == len(reference)  # read entirely from data already open or cached
    else:
        assert "data.array_record" in error, error
    # A new epoch over the damaged file is refused with a thresher error, never wrong data.
    try:
        again = [b["key"].tolist() for b in _loader(path, 0)]
    except ThresherError as e:
        assert "data.array_record" in str(e)
    else:
        assert again == reference
