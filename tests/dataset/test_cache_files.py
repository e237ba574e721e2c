"""cache(path) stores plain data without pickle; a changed, truncated or pickled file is refused."""

from __future__ import annotations

import json
import os
import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import thresher as th
from thresher.dataset.cache_codec import PLAIN
from thresher.sources import write_array_record

D = th.Dataset

_leaf = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(1 << 70), max_value=1 << 70),
    st.floats(allow_nan=False), st.complex_numbers(allow_nan=False), st.text(max_size=8),
    st.binary(max_size=8),
    hnp.arrays(hnp.scalar_dtypes(), hnp.array_shapes(min_dims=0, max_dims=3, max_side=3)),
    hnp.from_dtype(np.dtype("int32")).map(np.int32),
)
_values = st.recursive(_leaf, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.lists(inner, max_size=3).map(tuple),
    st.dictionaries(st.one_of(st.text(max_size=4), st.integers()), inner, max_size=3)), max_leaves=8)


def _same(a: object, b: object) -> bool:
    if isinstance(a, np.ndarray):
        return (isinstance(b, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape
                and a.tobytes() == b.tobytes())
    if isinstance(a, np.generic):
        return type(a) is type(b) and a.tobytes() == b.tobytes()  # type: ignore[union-attr]
    if isinstance(a, (list, tuple)):
        return (type(a) is type(b) and len(a) == len(b)  # type: ignore[arg-type]
                and all(_same(x, y) for x, y in zip(a, b)))  # type: ignore[call-overload]
    if isinstance(a, dict):
        return (isinstance(b, dict) and list(a) == list(b)
                and all(_same(a[k], b[k]) for k in a))
    return type(a) is type(b) and a == b


@settings(max_examples=150, deadline=None)
@given(_values)
def test_plain_serializer_round_trips_plain_data(value: object) -> None:
    assert _same(PLAIN.loads(PLAIN.dumps(value)), value)


@settings(max_examples=250, deadline=None)
@given(_values, st.data())
def test_plain_serializer_refuses_damaged_records_with_cache_errors(value: object, data: st.DataObject) -> None:
    rec = bytearray(PLAIN.dumps(value))
    cut = data.draw(st.integers(0, len(rec) - 1))
    for damaged in (bytes(rec[:cut]), bytes(rec) + b"\0"):
        with pytest.raises(th.errors.CacheError):
            PLAIN.loads(damaged)
    i = data.draw(st.integers(0, len(rec) - 1))
    rec[i] ^= data.draw(st.integers(1, 255))
    try:
        PLAIN.loads(bytes(rec))  # a flipped payload byte may still decode; a bad structure raises
    except th.errors.CacheError:
        pass


def test_objects_that_need_pickle_are_refused_by_default_and_stored_when_asked(tmp_path) -> None:
    class Point:
        def __init__(self, x: int) -> None:
            self.x = x

    with pytest.raises(th.errors.CacheError, match="serializer=pickle"):
        list(D.range(3).map(lambda i: np.array([i], dtype=object)).cache(str(tmp_path / "a")))
    assert not os.path.exists(tmp_path / "a.json")
    got = list(D.range(3).map(lambda i: {"p": (i, str(i))}).cache(str(tmp_path / "b"), serializer=pickle))
    assert got == [{"p": (i, str(i))} for i in range(3)]


RAN = "ran-planted-code"


class _Planted:
    """A pickle payload that would create a file if it were ever unpickled."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str, str]]:
        return (os.makedirs, (self.marker, 0o755))


def _plant(path: str, records: list[bytes]) -> None:
    """Replaces the cache file by other records and fixes its sidecar to match, as an attacker would."""
    from thresher.dataset.cache_files import file_digest

    write_array_record(path, records)
    with open(path + ".json") as f:
        meta = json.load(f)
    meta["parts"][0].update(num_records=len(records), file_bytes=os.path.getsize(path),
                            blake2b=file_digest(path))
    with open(path + ".json", "w") as f:
        json.dump(meta, f)


def test_a_planted_pickle_is_refused_not_run(tmp_path) -> None:
    path = str(tmp_path / "c.array_record")
    marker = str(tmp_path / RAN)
    ds = D.range(4).map(lambda x: {"x": np.full(2, x)})
    assert [e["x"].tolist() for e in ds.cache(path)] == [[i, i] for i in range(4)]
    _plant(path, [pickle.dumps(_Planted(marker))] * 4)
    with pytest.raises(th.errors.CacheError, match="looks like a pickle"):
        list(ds.cache(path))
    assert not os.path.exists(marker)
    # a sidecar that claims pickle is not trusted either: the reader's serializer decides
    with open(path + ".json") as f:
        meta = json.load(f)
    meta["serializer"] = "pickle"
    with open(path + ".json", "w") as f:
        json.dump(meta, f)
    with pytest.raises(th.errors.CacheError, match="serializer 'pickle'"):
        list(ds.cache(path))
    assert not os.path.exists(marker)


@pytest.mark.parametrize("damage", ["truncate", "flip", "replace"])
def test_a_changed_cache_file_is_detected(tmp_path, damage: str) -> None:
    path = str(tmp_path / "c.array_record")
    ds = D.range(64).map(lambda x: np.arange(x % 7, dtype=np.int32))
    list(ds.cache(path))
    size = os.path.getsize(path)
    if damage == "truncate":
        with open(path, "r+b") as f:
            f.truncate(size - 9)
    elif damage == "flip":
        with open(path, "r+b") as f:
            f.seek(size // 2)
            b = f.read(1)
            f.seek(size // 2)
            f.write(bytes([b[0] ^ 0x10]))
    else:
        write_array_record(path, [PLAIN.dumps(np.arange(i % 7, dtype=np.int32) + 1) for i in range(64)])
    with pytest.raises(th.errors.CacheError, match="c.array_record"):
        list(ds.cache(path))


@pytest.mark.parametrize("name", ["../outside.array_record", "/etc/passwd", "sub/c.array_record", "..", ""])
def test_a_cache_sidecar_naming_a_part_outside_its_folder_is_refused(tmp_path, name: str) -> None:
    os.makedirs(tmp_path / "cache")
    path = str(tmp_path / "cache" / "c.array_record")
    ds = D.range(3)
    list(ds.cache(path))
    write_array_record(str(tmp_path / "outside.array_record"), [PLAIN.dumps(i) for i in range(3)])
    with open(path + ".json") as f:
        meta = json.load(f)
    meta["parts"][0]["file"] = name
    with open(path + ".json", "w") as f:
        json.dump(meta, f)
    with pytest.raises(th.errors.CacheError, match="names a bad part"):
        list(ds.cache(path))


def test_a_cache_sidecar_of_an_older_format_is_refused(tmp_path) -> None:
    path = str(tmp_path / "c.array_record")
    ds = D.range(3)
    list(ds.cache(path))
    with open(path + ".json", "w") as f:
        json.dump({"version": 1, "fingerprint": "x", "num_records": 3}, f)
    with pytest.raises(th.errors.CacheError, match="another thresher"):
        list(ds.cache(path))


def test_processes_of_a_pod_meet_through_files_and_time_out_naming_what_is_missing(tmp_path) -> None:
    import threading

    from thresher.dataset.cache_files import build_disk_cache

    path = str(tmp_path / "pod.array_record")
    with pytest.raises(th.errors.CacheError, match=r"pod.array_record-00001-of-00002.done.json"):
        build_disk_cache(path, "fp", iter([1, 2]), process=(0, 2), timeout_s=0.3)
    with pytest.raises(th.errors.CacheError, match="process 0 to finish"):
        build_disk_cache(str(tmp_path / "other"), "fp", iter([3]), process=(1, 2), timeout_s=0.3)
    views: dict[int, object] = {}

    def member(i: int) -> None:
        views[i] = build_disk_cache(path, "fp", iter(range(10 * i, 10 * i + 3)), process=(i, 2), timeout_s=30)

    threads = [threading.Thread(target=member, args=(i,)) for i in (1, 0)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for v in views.values():
        assert list(v.__getitems__(range(6))) == [0, 1, 2, 10, 11, 12]  # type: ignore[attr-defined]
