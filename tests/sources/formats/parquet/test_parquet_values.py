"""ParquetSource returns, for any key, the row pyarrow reads, whatever the schema and row groups."""

from __future__ import annotations

import datetime
import os
import pickle
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import thresher as th
from tests.sources.formats.parquet.expected import gather_path, plain, pyarrow_rows, typed
from thresher.errors import FeatureError, RecordKeyError

_I32 = st.integers(-2**31, 2**31 - 1)
_TEXT = st.text(max_size=8)
_TYPES: dict[str, tuple[Any, Any]] = {
    "int8": (pa.int8(), st.integers(-128, 127)),
    "int64": (pa.int64(), st.integers(-2**63, 2**63 - 1)),
    "uint16": (pa.uint16(), st.integers(0, 2**16 - 1)),
    "float32": (pa.float32(), st.floats(-1e6, 1e6, width=32)),
    "float64": (pa.float64(), st.floats(allow_nan=False)),
    "bool": (pa.bool_(), st.booleans()),
    "string": (pa.string(), _TEXT),
    "binary": (pa.binary(), st.binary(max_size=8)),
    "date": (pa.date32(), st.dates(datetime.date(1970, 1, 1), datetime.date(2100, 1, 1))),
    "list_int": (pa.list_(pa.int32()), st.lists(_I32, max_size=4)),
    "list_str": (pa.list_(pa.string()), st.lists(_TEXT, max_size=3)),
    "fixed": (pa.list_(pa.float32(), 3), st.lists(st.floats(-10, 10, width=32), min_size=3, max_size=3)),
    "struct": (pa.struct([("a", pa.int64()), ("b", pa.string())]),
               st.fixed_dictionaries({"a": st.integers(0, 99), "b": _TEXT})),
    "nested": (pa.struct([("v", pa.list_(pa.float64()))]),
               st.fixed_dictionaries({"v": st.lists(st.floats(-5, 5), max_size=3)})),
    "map": (pa.map_(pa.string(), pa.int32()), st.dictionaries(_TEXT, st.one_of(st.none(), _I32), max_size=3)
            .map(lambda d: list(d.items()))),
    "map_of_lists": (pa.map_(pa.int64(), pa.list_(pa.int16())),
                     st.dictionaries(st.integers(-99, 99), st.lists(st.integers(-99, 99), max_size=2), max_size=2)
                     .map(lambda d: list(d.items()))),
}


@st.composite
def tables(draw: Any) -> tuple[pa.Table, int, bool, bool]:
    names = draw(st.lists(st.sampled_from(sorted(_TYPES)), min_size=1, max_size=4, unique=True))
    n = draw(st.integers(1, 40))
    cols = {}
    for name in names:
        typ, values = _TYPES[name]
        # pyarrow 25 cannot read back a null fixed-size list it wrote itself
        maybe = values if name == "fixed" else st.one_of(st.none(), values)
        cols[name] = pa.array(draw(st.lists(maybe, min_size=n, max_size=n)), type=typ)
    return (pa.table(cols), draw(st.integers(1, 9)), draw(st.booleans()), draw(st.booleans()))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=tables(), keys=st.lists(st.integers(0, 10**6), max_size=30), cache=st.sampled_from([0, 1 << 20]))
def test_every_key_is_pyarrows_row(tmp_path_factory: Any, case: Any, keys: list[int], cache: int) -> None:
    table, group, page_index, dictionary = case
    d = tmp_path_factory.mktemp("pq")
    path = str(d / "t.parquet")
    pq.write_table(table, path, row_group_size=group, write_page_index=page_index, use_dictionary=dictionary)
    src = th.sources.ParquetSource(path, cache_bytes=cache)
    expected = pyarrow_rows([path])
    assert len(src) == len(expected)
    keys = [k % len(src) for k in keys]
    got = src.__getitems__(keys)
    assert [plain(r) for r in got] == [expected[k] for k in keys]
    with gather_path(native=False):  # Arrow's take: the same values, of the same types
        assert typed(th.sources.ParquetSource(path, cache_bytes=cache).__getitems__(keys)) == typed(got)
    if keys:
        assert plain(src[keys[0]]) == expected[keys[0]]
    meta = pq.ParquetFile(path).metadata
    ends = np.cumsum([meta.row_group(i).num_rows for i in range(meta.num_row_groups)]).tolist()
    assert src.block_boundaries().tolist() == [0, *ends[:-1]]
    assert src.row_group_offsets.tolist() == [0, *ends]


def _write_parts(d: str) -> list[str]:
    paths = []
    for i, n in enumerate([7, 1, 12]):
        ids = list(range(100 * i, 100 * i + n))
        t = pa.table({"id": ids, "text": [f"row {k}" * (k % 3) for k in ids],
                      "tags": [[k, k + 1][: k % 3] if k % 5 else None for k in ids]})
        p = os.path.join(d, f"part-{i}.parquet")
        pq.write_table(t, p, row_group_size=3 + i)
        paths.append(p)
    return paths


def test_files_globs_directories_and_lists_form_one_key_space(tmp_path: Any) -> None:
    paths = _write_parts(str(tmp_path))
    expected = pyarrow_rows(paths)
    for spec in (str(tmp_path / "part-*.parquet"), str(tmp_path), paths):
        src = th.sources.ParquetSource(spec)
        assert len(src) == 20 and src.paths == paths
        assert [plain(r) for r in src.__getitems__(list(range(20))[::-1])] == expected[::-1]
    src = th.sources.ParquetSource(paths, columns=["id"])
    assert src[8] == {"id": np.int64(200)} and src.columns == ["id"]
    assert src.record_locations([0, 7, 19]) == [(paths[0], 0), (paths[1], 0), (paths[2], 11)]


def test_values_are_numpy_as_documented(tmp_path: Any) -> None:
    path = str(tmp_path / "v.parquet")
    t = pa.table({"i": pa.array([1, None], pa.int32()), "f": [0.5, None], "b": [True, None],
                  "s": ["x", None], "y": [b"\x00", None], "l": [[1, 2], None],
                  "fx": pa.array([[1, 2], [3, 4]], pa.list_(pa.int16(), 2)),
                  "st": [{"a": 1}, None], "cat": pa.array(["u", "v"]).dictionary_encode()})
    pq.write_table(t, path)
    r0, r1 = th.sources.ParquetSource(path).__getitems__([0, 1])
    assert r0["i"] == 1 and r0["i"].dtype == np.int32 and r0["b"].dtype == np.bool_
    assert isinstance(r0["s"], str) and r0["y"] == b"\x00" and r0["cat"] == "u"
    assert isinstance(r0["l"], np.ndarray) and r0["l"].tolist() == [1, 2]
    assert r0["fx"].dtype == np.int16 and r0["fx"].shape == (2,)
    assert r0["st"] == {"a": 1}
    assert all(r1[c] is None for c in ("i", "f", "b", "s", "y", "l", "st"))


def test_an_unsupported_type_is_refused_naming_column_and_type(tmp_path: Any) -> None:
    path = str(tmp_path / "t.parquet")
    pq.write_table(pa.table({"ok": [1], "t": pa.array([datetime.time(1, 2)], pa.time64("us"))}), path)
    with pytest.raises(FeatureError, match=r"column 't'.*Arrow type time64\[us\]"):
        th.sources.ParquetSource(path)
    assert th.sources.ParquetSource(path, columns=["ok"])[0] == {"ok": 1}


def test_a_map_is_a_dict_and_one_with_a_repeated_key_is_refused_naming_the_column(tmp_path: Any) -> None:
    path = str(tmp_path / "m.parquet")
    maps = [[("a", 1), ("b", None)], None, [], [("k", 2), ("k", 3)]]
    pq.write_table(pa.table({"id": [0, 1, 2, 3], "m": pa.array(maps, pa.map_(pa.string(), pa.int32()))}), path)
    src = th.sources.ParquetSource(path)
    r0, r1, r2 = src.__getitems__([0, 1, 2])
    assert r0["m"] == {"a": 1, "b": None} and r0["m"]["a"].dtype == np.int32
    assert r1["m"] is None and r2["m"] == {}
    with pytest.raises(FeatureError, match=r"column 'm' of ParquetSource\(.*m\.parquet'\): a map value holds the "
                                           r"key 'k' more than once"):
        src[3]
    assert th.sources.ParquetSource(path, columns=["id"])[3] == {"id": 3}
    # a map keyed by something a dict cannot hold is refused when the source is opened
    keyed = str(tmp_path / "keyed.parquet")
    pq.write_table(pa.table({"m": pa.array([[([1], 2)]], pa.map_(pa.list_(pa.int8()), pa.int8()))}), keyed)
    with pytest.raises(FeatureError, match=r"column 'm'.*map<list<"):
        th.sources.ParquetSource(keyed)


def test_keys_out_of_range_and_pickles_are_small(tmp_path: Any) -> None:
    paths = _write_parts(str(tmp_path))
    src = th.sources.ParquetSource(paths)
    with pytest.raises(RecordKeyError):
        src[20]
    src.__getitems__([0, 19])
    blob = pickle.dumps(src)
    assert len(blob) < 4096
    again = pickle.loads(blob)
    assert plain(again[19]) == plain(src[19]) and again.fingerprint == src.fingerprint


def test_the_cache_is_bounded_in_bytes_and_decodes_a_row_group_once(tmp_path: Any) -> None:
    path = str(tmp_path / "c.parquet")
    pq.write_table(pa.table({"x": list(range(1000)), "s": [str(i) for i in range(1000)]}), path,
                   row_group_size=100)
    src = th.sources.ParquetSource(path)
    src.__getitems__(list(range(0, 1000, 7)))
    info = src.cache_info()
    assert info["misses"] == 10 and info["entries"] == 10
    per_group = info["bytes"] // 10
    budget = 3 * per_group + per_group // 2
    small = th.sources.ParquetSource(path, cache_bytes=budget)
    assert [plain(r) for r in small.__getitems__(list(range(0, 1000, 7)))] == \
        [plain(r) for r in src.__getitems__(list(range(0, 1000, 7)))]
    info = small.cache_info()
    assert info["bytes"] <= budget and info["entries"] == 3


def test_numbers_are_cached_as_arrays_not_python_objects(tmp_path: Any) -> None:
    path = str(tmp_path / "n.parquet")
    pq.write_table(pa.table({"x": list(range(1000)),
                             "v": pa.array([[float(i)] * 4 for i in range(1000)], pa.list_(pa.float64(), 4))}),
                   path, row_group_size=100)
    src = th.sources.ParquetSource(path)
    r = src[205]
    # a row group: 100 int64 and 400 float64 in Arrow, held as two arrays (no 64 B object each)
    assert src.cache_info()["bytes"] < 5000
    assert type(r["x"]) is np.int64 and r["x"] == 205
    assert r["v"].tolist() == [205.0] * 4 and r["v"].shape == (4,) and not r["v"].flags.writeable


def test_fingerprint_changes_with_the_files_and_columns(tmp_path: Any) -> None:
    paths = _write_parts(str(tmp_path))
    a = th.sources.ParquetSource(paths)
    assert a.fingerprint == th.sources.ParquetSource(paths).fingerprint
    assert a.fingerprint != th.sources.ParquetSource(paths[:2]).fingerprint
    assert a.fingerprint != th.sources.ParquetSource(paths, columns=["id"]).fingerprint


def test_empty_files_and_row_groups_make_no_blocks(tmp_path: Any) -> None:
    empty, two = str(tmp_path / "a.parquet"), str(tmp_path / "b.parquet")
    pq.write_table(pa.table({"x": pa.array([], pa.int64())}), empty)
    pq.write_table(pa.table({"x": [1, 2]}), two)
    src = th.sources.ParquetSource([empty, two])
    assert len(src) == 2 and src[1] == {"x": 2} and src.__getitems__([]) == []
    assert src.block_boundaries().tolist() == [0]
    assert th.sources.protocol.natural_block_starts(src, 1).tolist() == [0]


def test_threads_sharing_a_source_with_a_small_cache_read_pyarrows_rows(tmp_path: Any) -> None:
    path = str(tmp_path / "t.parquet")
    n = 2000
    pq.write_table(pa.table({"x": list(range(n)), "s": [f"r{i}" for i in range(n)],
                             "f": pa.array([[float(i), 1.0] for i in range(n)], pa.list_(pa.float32(), 2))}),
                   path, row_group_size=50)
    expected = pyarrow_rows([path])
    probe = th.sources.ParquetSource(path)
    probe[0]
    src = th.sources.ParquetSource(path, cache_bytes=3 * probe.cache_info()["bytes"])  # 3 of 40 row groups
    rng = np.random.default_rng(0)
    batches = [rng.integers(0, n, 64).tolist() for _ in range(160)]
    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(src.__getitems__, batches))
    assert [[plain(r) for r in b] for b in got] == [[expected[k] for k in keys] for keys in batches]
    info = src.cache_info()
    assert info["entries"] <= 3 and info["misses"] > 40


@pytest.mark.parametrize("names", [["a"], ["x y", "q'uote", "class", "k0", "v0", "columns"],
                                   [f"c{i}" for i in range(40)]])
def test_records_have_every_column_whatever_its_name(tmp_path: Any, names: list[str]) -> None:
    """The records of an all-narrow source are made by code written for its column count: one
    column, names that are not identifiers (or that the code uses itself), many columns."""
    table = pa.table({n: pa.array([i * 10 + j for j in range(50)], pa.int64()) for i, n in enumerate(names)})
    path = os.path.join(str(tmp_path), "names.parquet")
    pq.write_table(table, path, row_group_size=7)
    src = th.sources.ParquetSource(path)
    keys = np.random.default_rng(0).permutation(50).tolist()
    got = src.__getitems__(keys)
    assert [list(r) for r in got] == [names] * 50
    assert got == [{n: np.int64(i * 10 + k) for i, n in enumerate(names)} for k in keys]


def test_no_columns_gives_empty_records(tmp_path: Any) -> None:
    path = os.path.join(str(tmp_path), "one.parquet")
    pq.write_table(pa.table({"a": [1, 2, 3]}), path)
    src = th.sources.ParquetSource(path, columns=[])
    assert len(src) == 3 and src.__getitems__([2, 0]) == [{}, {}]
