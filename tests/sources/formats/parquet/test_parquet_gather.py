"""The C gatherer: a batch's values read from many row groups' Arrow buffers in one pass. It gives
Arrow's values (the same types), checks every position against its buffer, and a source that
uses it never merges tables and still reads pyarrow's rows through evictions."""

from __future__ import annotations

import datetime
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import thresher as th
from tests.sources.formats.parquet.expected import gather_path, plain, pyarrow_rows, typed
from thresher.sources.formats.parquet.convert import column_values
from thresher.sources.formats.parquet.gather import _COLUMN, Gatherer
from thresher.sources.remote.highway import native_module

pytestmark = pytest.mark.skipif(native_module() is None, reason="thresher's C module could not be built here")

_TYPES: list[tuple[Any, Any]] = [
    (pa.int8(), st.integers(-128, 127)),
    (pa.uint16(), st.integers(0, 2**16 - 1)),
    (pa.int64(), st.integers(-2**63, 2**63 - 1)),
    (pa.float32(), st.floats(-1e6, 1e6, width=32)),
    (pa.float64(), st.floats(allow_nan=False)),
    (pa.bool_(), st.booleans()),
    (pa.string(), st.text(max_size=12)),
    (pa.large_string(), st.text(max_size=12)),
    (pa.binary(), st.binary(max_size=12)),
    (pa.large_binary(), st.binary(max_size=12)),
    (pa.date32(), st.dates(datetime.date(1900, 1, 1), datetime.date(2200, 1, 1))),
    (pa.timestamp("us"), st.datetimes(datetime.datetime(1900, 1, 1), datetime.datetime(2200, 1, 1))),
    (pa.duration("ms"), st.timedeltas(datetime.timedelta(days=-999), datetime.timedelta(days=999))),
]


@st.composite
def _tables(draw: Any) -> tuple[list[Any], list[pa.RecordBatch]]:
    chosen = draw(st.lists(st.sampled_from(range(len(_TYPES))), min_size=1, max_size=3))
    types = [_TYPES[i][0] for i in chosen]
    batches = []
    for _ in range(draw(st.integers(1, 4))):
        n = draw(st.integers(1, 12))
        cut = draw(st.integers(0, n - 1))  # a slice: arrays with an offset into their buffers
        arrays = [pa.array(draw(st.lists(st.one_of(st.none(), _TYPES[i][1]), min_size=n, max_size=n)), t)
                  .slice(cut) for i, t in zip(chosen, types, strict=True)]
        batches.append(pa.RecordBatch.from_arrays(arrays, names=[f"c{j}" for j in range(len(arrays))]))
    return types, batches


@settings(max_examples=80, deadline=None)
@given(case=_tables(), data=st.data())
def test_the_gatherer_gives_arrows_values_of_the_same_types(case: Any, data: Any) -> None:
    types, batches = case
    gatherer = Gatherer.of(types)
    assert gatherer is not None
    specs = tuple(gatherer.spec(b) for b in batches)
    keys = data.draw(st.lists(st.tuples(st.integers(0, len(batches) - 1), st.integers(0, 10**6)), max_size=40))
    slots = np.array([s for s, _ in keys], dtype=np.int64)
    rows = np.array([r % batches[s].num_rows for s, r in keys], dtype=np.int64)
    got = gatherer.gather(specs, slots, rows)
    for j in range(len(types)):
        expected = [column_values(batches[s].column(j).slice(r, 1))[0] for s, r in zip(slots, rows, strict=True)]
        assert typed(got[j]) == typed(expected)


def test_columns_of_nulls_alone_and_empty_values() -> None:
    batch = pa.record_batch({"s": pa.nulls(3, pa.string()), "e": pa.array(["", "", ""]),
                             "b": pa.array([b"", None, b""]), "n": pa.nulls(3, pa.int32())})
    gatherer = Gatherer.of([pa.string(), pa.string(), pa.binary(), pa.int32()])
    assert gatherer is not None
    got = gatherer.gather((gatherer.spec(batch),), np.zeros(3, np.int64), np.array([2, 0, 1]))
    assert got == [[None, None, None], ["", "", ""], [b"", b"", None], [None, None, None]]


def test_positions_outside_the_buffers_are_errors_not_reads() -> None:
    batch = pa.record_batch({"s": ["a", "bb"], "n": [1, 2]})
    gatherer = Gatherer.of([pa.string(), pa.int64()])
    assert gatherer is not None
    specs = (gatherer.spec(batch),)
    module = native_module()
    zero = np.zeros(1, np.int64)
    with pytest.raises(IndexError, match="past the offsets"):
        module.gather_binary(specs, 0, zero, np.array([2]), True, False)
    with pytest.raises(IndexError, match="past the values"):
        module.gather_fixed(specs, 1, zero, np.array([5]), 8)
    with pytest.raises(IndexError, match="out of range"):
        module.gather_fixed(specs, 1, zero, np.array([-1]), 8)
    with pytest.raises(ValueError, match="names table 1"):
        module.gather_binary(specs, 0, np.ones(1, np.int64), zero, True, False)
    with pytest.raises(ValueError, match="names table 0"):
        module.gather_binary((None,), 0, zero, zero, True, False)
    with pytest.raises(ValueError, match="no column 2"):
        module.gather_fixed(specs, 2, zero, zero, 8)
    with pytest.raises(ValueError, match="not a column spec"):
        module.gather_fixed(((b"short", ()),), 0, zero, zero, 8)
    with pytest.raises(ValueError, match="one length"):
        module.gather_fixed(specs, 1, zero, np.zeros(2, np.int64), 8)
    with pytest.raises(TypeError, match="tuple"):
        module.gather_fixed(list(specs), 1, zero, zero, 8)
    offsets, data = pa.py_buffer(np.array([0, 99], np.int32).tobytes()), pa.py_buffer(b"abc")
    bad = _COLUMN.pack(0, 0, offsets.address, offsets.size, data.address, data.size, 0)  # Arrow refuses to make it
    with pytest.raises(ValueError, match="outside its data"):
        module.gather_binary(((bad, (offsets, data)),), 0, zero, zero, True, False)
    with pytest.raises(UnicodeDecodeError):
        invalid = pa.array([b"\xff"], pa.binary()).view(pa.string())
        gatherer.gather((gatherer.spec(pa.record_batch({"s": invalid, "n": [1]})),), zero, zero)


def test_types_it_does_not_gather_keep_arrows_take(tmp_path: Any) -> None:
    path = str(tmp_path / "l.parquet")
    pq.write_table(pa.table({"x": [[1, 2], [3]], "n": [1, 2]}), path)
    assert Gatherer.of([pa.list_(pa.int64()), pa.int64()]) is None
    assert Gatherer.of([pa.float16()]) is None and Gatherer.of([]) is None
    src = th.sources.ParquetSource(path)
    assert [plain(r) for r in src.__getitems__([1, 0])] == [{"x": [3], "n": 2}, {"x": [1, 2], "n": 1}]
    assert src._store().spec_of is None
    with gather_path(native=False):
        assert th.sources.ParquetSource(path, columns=["n"])._store().spec_of is None
    assert th.sources.ParquetSource(path, columns=["n"])._store().spec_of is not None


def test_a_dictionary_typed_column_is_gathered_decoded(tmp_path: Any) -> None:
    path = str(tmp_path / "d.parquet")  # a schema that says dictionary (a pandas Categorical's)
    labels = pa.array(["cat", "dog", None, "cat", "emu", "dog"] * 5).dictionary_encode()
    pq.write_table(pa.table({"kind": labels, "n": list(range(30))}), path, row_group_size=7)
    src = th.sources.ParquetSource(path)
    assert str(src.schema.field("kind").type).startswith("dictionary")
    keys = [29, 2, 13, 0, 8]
    assert [plain(r) for r in src.__getitems__(keys)] == [pyarrow_rows([path])[k] for k in keys]
    assert src._store().spec_of is not None
    with gather_path(native=False):
        assert typed(th.sources.ParquetSource(path).__getitems__(keys)) == typed(src.__getitems__(keys))


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), budget=st.sampled_from([0.05, 0.2, 0.5]))
def test_a_gathering_source_never_merges_and_reads_pyarrows_rows_through_evictions(
        tmp_path_factory: Any, seed: int, budget: float) -> None:
    path = str(tmp_path_factory.mktemp("g") / "g.parquet")
    n = 3000
    rng = np.random.default_rng(7)
    pq.write_table(pa.table({"text": [f"t{i}" * (i % 4) if i % 9 else None for i in range(n)],
                             "label": rng.integers(0, 10, n), "ok": [bool(i % 3) for i in range(n)]}),
                   path, row_group_size=40)
    expected = pyarrow_rows([path])
    probe = th.sources.ParquetSource(path)
    probe.__getitems__(list(range(0, n, 40)))
    src = th.sources.ParquetSource(path, cache_bytes=int(budget * probe.cache_info()["bytes"]))
    order = np.random.default_rng(seed).permutation(n)
    for i in range(0, n, 97):
        keys = order[i:i + 97]
        assert [plain(r) for r in src.__getitems__(keys)] == [expected[k] for k in keys]
    info = src.cache_info()
    assert info["merged"] == 0 and info["merged_tables"] == 0 and info["misses"] > 75  # evicted and decoded again
    store = src._store()
    assert store.spec_of is not None
    assert len(store._specs) <= 2 * info["entries"] + 17  # evicted tables' slots are reclaimed


@settings(max_examples=40, deadline=None)
@given(sizes=st.lists(st.integers(0, 6), min_size=1, max_size=5), data=st.data())
def test_held_objects_are_taken_by_list_and_row_and_bounds_are_errors(sizes: list[int], data: Any) -> None:
    """The wide columns' held values (Python objects, one list per row group), taken per key in C."""
    lists = tuple([f"{s}.{r}".encode() * (r + 1) for r in range(n)] for s, n in enumerate(sizes))
    keys = [(s, r) for s, n in enumerate(sizes) for r in range(n)]
    picked = data.draw(st.lists(st.sampled_from(keys), max_size=30)) if keys else []
    slots = np.array([s for s, _ in picked], dtype=np.int64)
    rows = np.array([r for _, r in picked], dtype=np.int64)
    gatherer = Gatherer(native_module(), [])
    out = gatherer.objects(lists, slots, rows)
    assert out == [lists[s][r] for s, r in picked]
    assert all(a is lists[s][r] for a, (s, r) in zip(out, picked, strict=True))  # the objects held, not copies
    module = native_module()
    bad = data.draw(st.sampled_from([(len(sizes), 0), (-1, 0), (0, sizes[0]), (0, -1)]))
    with pytest.raises(IndexError, match="gather_objects"):
        module.gather_objects(lists, np.array([bad[0]], dtype=np.int64), np.array([bad[1]], dtype=np.int64))
    with pytest.raises(ValueError, match="one length"):
        module.gather_objects(lists, np.zeros(2, dtype=np.int64), np.zeros(1, dtype=np.int64))
    with pytest.raises(TypeError, match="not a list"):
        module.gather_objects((tuple(lists[0]),), np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64))
