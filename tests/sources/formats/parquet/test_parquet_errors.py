"""Bad Parquet input: each case is a specific thresher error naming the file (and the row
group and column where there is one), never wrong data."""

from __future__ import annotations

import os
import time
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import thresher as th
from tests.helpers import run_script, without_descriptors
from thresher.errors import ConfigError, CorruptSourceError, SourceNotFoundError


def _write(path: str, n: int = 40, **kw: Any) -> str:
    t = pa.table({"id": list(range(n)), "text": [f"value {i:04d}" for i in range(n)]})
    pq.write_table(t, path, row_group_size=10, **kw)
    return path


def test_a_file_that_is_not_parquet(tmp_path: Any) -> None:
    path = tmp_path / "x.parquet"
    path.write_bytes(b"this is not parquet at all" * 10)
    with pytest.raises(CorruptSourceError, match=r"x\.parquet.*not a readable Parquet file"):
        th.sources.ParquetSource(str(path))


def test_a_truncated_footer(tmp_path: Any) -> None:
    path = _write(str(tmp_path / "t.parquet"))
    data = open(path, "rb").read()
    with open(path, "wb") as f:
        f.write(data[:-30])
    with pytest.raises(CorruptSourceError, match=r"t\.parquet.*footer could not be read"):
        th.sources.ParquetSource(path)


def test_a_corrupt_row_group_names_file_row_group_and_column(tmp_path: Any) -> None:
    path = _write(str(tmp_path / "c.parquet"), compression="none", write_page_checksum=True)
    col = pq.ParquetFile(path).metadata.row_group(2).column(1)
    start = col.dictionary_page_offset if col.has_dictionary_page else col.data_page_offset
    data = bytearray(open(path, "rb").read())
    data[start + col.total_compressed_size - 3] ^= 0xFF  # a byte of the last value of row group 2
    st = os.stat(path)
    with open(path, "r+b") as f:  # same size, same mtime: only the data is wrong
        f.write(bytes(data))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    src = th.sources.ParquetSource(path)
    assert src[5]["id"] == 5  # other row groups read fine
    with pytest.raises(CorruptSourceError, match=r"row group 2 of '.*c\.parquet', column 'text'"):
        src.__getitems__([25])


def test_schemas_that_differ_name_both_files_and_the_column(tmp_path: Any) -> None:
    a = _write(str(tmp_path / "a.parquet"))
    b = str(tmp_path / "b.parquet")
    pq.write_table(pa.table({"id": [1.5], "text": ["x"]}), b)
    with pytest.raises(CorruptSourceError, match=r"column 'id' is int64 in '.*a\.parquet' but double in '.*b\.parquet'"):
        th.sources.ParquetSource([a, b])
    c = str(tmp_path / "c.parquet")
    pq.write_table(pa.table({"id": [1]}), c)
    with pytest.raises(CorruptSourceError, match=r"column 'text' is in '.*a\.parquet' but not in '.*c\.parquet'"):
        th.sources.ParquetSource([a, c])
    assert len(th.sources.ParquetSource([a, c], columns=["id"])) == 41


def test_a_file_changed_after_the_source_was_opened(tmp_path: Any) -> None:
    path = _write(str(tmp_path / "m.parquet"))
    src = th.sources.ParquetSource(path)
    assert src[0]["id"] == 0
    time.sleep(0.01)
    _write(path, n=45)
    with pytest.raises(CorruptSourceError, match=r"m\.parquet' changed after the source was opened \(reading row group 3\)"):
        src[35]
    os.remove(path)
    with pytest.raises(SourceNotFoundError, match="disappeared"):
        src[35]


def test_missing_paths_and_columns(tmp_path: Any) -> None:
    with pytest.raises(SourceNotFoundError, match="does not exist"):
        th.sources.ParquetSource(str(tmp_path / "none.parquet"))
    with pytest.raises(SourceNotFoundError, match="matches no Parquet file"):
        th.sources.ParquetSource(str(tmp_path / "*.parquet"))
    with pytest.raises(SourceNotFoundError, match=r"holds no \*\.parquet"):
        th.sources.ParquetSource(str(tmp_path))
    path = _write(str(tmp_path / "ok.parquet"))
    with pytest.raises(ConfigError, match=r"columns \['nope'\] are not in"):
        th.sources.ParquetSource(path, columns=["nope"])


def test_more_local_files_than_descriptors_are_read(tmp_path: Any) -> None:
    # each open Parquet file holds a descriptor: a source keeps a quarter of `ulimit -n` open
    # (32 under 128) and lets the least recently used go; 300 files are read in a shuffle
    # (before: "Too many open files" after about 60 files here, reported as a corrupt file)
    for i in range(300):
        pq.write_table(pa.table({"x": list(range(i * 3, i * 3 + 3))}), str(tmp_path / f"p{i:03d}.parquet"))
    script = (
        "import os, resource, sys\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (128, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))\n"
        "import numpy as np\n"
        "import thresher as th\n"
        f"src = th.sources.ParquetSource({str(tmp_path / '*.parquet')!r})\n"
        "keys = np.random.default_rng(0).permutation(len(src))\n"
        "for _ in range(2):\n"
        "    got = [int(r['x']) for i in range(0, len(keys), 64) for r in src.__getitems__(keys[i:i + 64])]\n"
        "    assert got == keys.tolist()\n"
        "print(len(src), len(src._process()['files']))\n"
    )
    out = run_script(script)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split() == ["900", "32"]


def test_running_out_of_descriptors_is_said_not_called_corruption(tmp_path: Any) -> None:
    # with no descriptor left, opening a source (its footers) and reading a file not open yet
    # are SourceErrors that say so; both called the file corrupt before
    path = _write(str(tmp_path / "a.parquet"))
    setup = (f"th.sources.ParquetSource({path!r})[0]  # every module imported first\n"
             f"unread = th.sources.ParquetSource({path!r})")
    steps = [f"th.sources.ParquetSource({path!r})", "unread[1]"]
    assert without_descriptors(setup, steps) == ["SourceError", "True", "True"] * 2


@pytest.mark.parametrize("native", [True, False])
def test_a_string_that_is_not_utf8_names_file_row_group_and_column(tmp_path: Any, native: bool) -> None:
    from tests.sources.formats.parquet.expected import gather_path

    path = str(tmp_path / "u.parquet")
    values = [f"v{i}".encode() for i in range(30)]
    values[23] = b"\xff\xfe bad"  # a writer that did not check (Arrow's own writer does not)
    pq.write_table(pa.table({"id": list(range(30)), "text": pa.array(values, pa.binary()).view(pa.string())}),
                   path, row_group_size=10)
    with gather_path(native):
        src = th.sources.ParquetSource(path)
        assert src.__getitems__([3, 29]) == [{"id": 3, "text": "v3"}, {"id": 29, "text": "v29"}]
        with pytest.raises(CorruptSourceError, match=r"row group 2 of '.*u\.parquet', column 'text'.*not UTF-8"):
            src.__getitems__([0, 23, 11])
        assert src.__getitems__([22])[0]["text"] == "v22"  # the rest still reads
