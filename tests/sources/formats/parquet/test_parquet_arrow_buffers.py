"""Number, bool and time columns are read from Arrow's buffers: the same values as pyarrow's
``to_numpy``, and no pandas import (pyarrow's ``to_numpy`` imports pandas when it is installed,
about half a second in every worker)."""

from __future__ import annotations

import datetime
import os
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import given, settings
from hypothesis import strategies as st

from thresher.sources.formats.parquet.arrow import numpy_of

_TYPES = [
    (pa.int8(), st.integers(-128, 127)), (pa.uint32(), st.integers(0, 2**32 - 1)),
    (pa.int64(), st.integers(-2**63, 2**63 - 1)), (pa.float16(), st.floats(-100, 100, width=16)),
    (pa.float32(), st.floats(-1e6, 1e6, width=32)), (pa.float64(), st.floats(allow_nan=False)),
    (pa.bool_(), st.booleans()),
    (pa.date32(), st.dates(datetime.date(1970, 1, 1), datetime.date(2100, 1, 1))),
    (pa.date64(), st.dates(datetime.date(1970, 1, 1), datetime.date(2100, 1, 1))),
    (pa.timestamp("us"), st.datetimes(datetime.datetime(1970, 1, 1), datetime.datetime(2100, 1, 1))),
    (pa.timestamp("s", tz="UTC"), st.datetimes(datetime.datetime(1970, 1, 1), datetime.datetime(2100, 1, 1))),
    (pa.duration("ms"), st.timedeltas(datetime.timedelta(0), datetime.timedelta(days=999))),
]


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_numpy_of_equals_pyarrows_to_numpy_for_every_type_and_slice(data: st.DataObject) -> None:
    t, values = data.draw(st.sampled_from(_TYPES))
    arr = pa.array(data.draw(st.lists(values, max_size=40)), type=t)
    lo = data.draw(st.integers(0, len(arr)))
    part = arr.slice(lo, data.draw(st.integers(0, len(arr) - lo)))
    got, expected = numpy_of(part), part.to_numpy(zero_copy_only=False)
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)
    assert not got.flags.writeable


def test_reading_parquet_records_imports_no_pandas(tmp_path: object) -> None:
    path = os.path.join(str(tmp_path), "t.parquet")
    pq.write_table(pa.table({
        "n": pa.array([1, None, 3]), "f": pa.array([0.5, 1.5, None]), "b": pa.array([True, None, False]),
        "d": pa.array([datetime.date(2020, 1, 1), None, datetime.date(2020, 1, 3)]),
        "l": pa.array([[1, 2], None, []]), "fixed": pa.array([[1.0, 2.0]] * 3, pa.list_(pa.float32(), 2)),
        "s": pa.array(["a", "b", None]),
    }), path, row_group_size=2)
    code = ("import sys, thresher as th\n"
            f"src = th.sources.ParquetSource({path!r})\n"
            "rows = src.__getitems__([2, 0, 1])\n"
            "assert rows[0]['n'] == 3 and rows[1]['l'].tolist() == [1, 2] and rows[2]['b'] is None, rows\n"
            "print('pandas' in sys.modules)\n")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__)))))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
