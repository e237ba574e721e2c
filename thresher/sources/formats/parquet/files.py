"""The files of a Parquet source: found, their footers read, their schemas compared.

``find_files`` expands paths, globs, directories and URLs into a sorted, stable list
of objects; ``read_layout`` reads one footer (row counts per row group, the Arrow
schema); ``check_schemas`` refuses files whose columns differ, naming both files and
the column. Every failure is a thresher error naming the file (and the row group and
column where there is one).

Example:
    >>> import os, tempfile
    >>> import pyarrow as pa, pyarrow.parquet as pq
    >>> d = tempfile.mkdtemp()
    >>> pq.write_table(pa.table({"x": list(range(5))}), os.path.join(d, "a.parquet"), row_group_size=2)
    >>> objs = find_files(d, None)
    >>> layout = read_layout(objs[0], open_local)
    >>> layout.row_counts
    [2, 2, 1]
"""

from __future__ import annotations

import dataclasses
import glob
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from thresher.errors import ConfigError, CorruptSourceError, SourceError, SourceNotFoundError
from thresher.sources.formats.descriptors import no_descriptor_error, out_of_descriptors
from thresher.sources.formats.parquet.arrow import pyarrow, pyarrow_parquet
from thresher.sources.remote.fs import RemoteObject, expand, is_url, local_path

__all__ = ["FileLayout", "check_schemas", "find_files", "open_local", "read_layout"]

_GLOB_CHARS = frozenset("*?[")


@dataclasses.dataclass(frozen=True)
class FileLayout:
    """One Parquet file as its footer describes it."""

    obj: RemoteObject
    row_counts: list[int]
    schema: Any  # pyarrow.Schema
    metadata: Any = None  # pyarrow.parquet.FileMetaData, kept in the process that read it


def _local_version(path: str) -> str:
    return str(os.stat(path).st_mtime_ns)


def find_files(paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
               storage_options: Mapping[str, Any] | None) -> list[RemoteObject]:
    """Paths, globs (sorted), directories (their ``*.parquet`` files, sorted, recursively)
    and URLs, in the order given, with their sizes and versions (mtime or ETag)."""
    items = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    if not items:
        raise ConfigError("ParquetSource: no paths given: pass a file, a glob, a directory or a list of them")
    out: list[RemoteObject] = []
    urls: list[str] = []  # a run of URLs, looked up together (one listing, or requests at once)
    for item in (os.fspath(p) for p in items):
        if is_url(item):
            if not _GLOB_CHARS & set(item) and item.endswith("/"):
                item += "**/*.parquet"
            urls.append(item)
            continue
        if urls:
            out.extend(expand(urls, storage_options))
            urls = []
        p = os.path.expanduser(local_path(item))
        if _GLOB_CHARS & set(p):
            matches = sorted(m for m in glob.glob(p, recursive=True) if os.path.isfile(m))
            if not matches:
                raise SourceNotFoundError(f"the pattern {p!r} matches no Parquet file")
        elif os.path.isdir(p):
            matches = sorted(glob.glob(os.path.join(glob.escape(p), "**", "*.parquet"), recursive=True))
            if not matches:
                raise SourceNotFoundError(f"the directory {p!r} holds no *.parquet file")
        elif os.path.isfile(p):
            matches = [p]
        else:
            raise SourceNotFoundError(f"Parquet file {p!r} does not exist")
        out.extend(RemoteObject(m, os.path.getsize(m), _local_version(m)) for m in matches)
    if urls:
        out.extend(expand(urls, storage_options))
    return out


def open_local(obj: RemoteObject, metadata: Any = None) -> Any:
    """A ``pyarrow.parquet.ParquetFile`` over a local file (page checksums verified); with
    ``metadata`` (the footer read before), the footer is not read again.

    Column chunks are read as they are decoded, not buffered first (``pre_buffer``, which
    coalesces the requests to a remote store): from a local file that buffer is one more
    copy of each row group, 12% of a row group's decode here (1M short texts, and 100k
    small JPEGs)."""
    return pyarrow_parquet().ParquetFile(obj.url, metadata=metadata, page_checksum_verification=True,
                                         pre_buffer=False)


def read_layout(obj: RemoteObject, opener: Callable[..., Any]) -> FileLayout:
    """The footer of ``obj``: row counts of its row groups and its Arrow schema.

    CorruptSourceError names the file when it is not Parquet or its footer is truncated.
    """
    pa = pyarrow()
    try:
        pf = opener(obj)
        meta = pf.metadata
        counts = [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
        schema = pf.schema_arrow
    except SourceError:
        raise
    except (pa.ArrowException, OSError, ValueError) as e:
        if not is_url(obj.url) and not os.path.exists(obj.url):
            raise SourceNotFoundError(f"Parquet file {obj.url!r} disappeared before it was opened") from e
        if out_of_descriptors(e):
            raise no_descriptor_error(obj.url, e) from e
        raise CorruptSourceError(
            f"{obj.url!r} ({obj.size} bytes) is not a readable Parquet file: its footer could not be "
            f"read ({type(e).__name__}: {e}). It is another format, truncated or corrupt; rewrite it "
            "(e.g. pyarrow.parquet.write_table)") from e
    if sum(counts) != meta.num_rows:
        raise CorruptSourceError(f"{obj.url!r}: the footer's row groups hold {sum(counts)} rows but "
                                 f"it says the file has {meta.num_rows}; the file is corrupt")
    return FileLayout(obj, counts, schema, meta)


def select_columns(layout: FileLayout, columns: Sequence[str] | None) -> list[str]:
    """The columns to read: ``columns`` checked against the first file, or all of them."""
    names = list(layout.schema.names)
    if columns is None:
        return names
    wanted = [columns] if isinstance(columns, str) else list(columns)
    missing = [c for c in wanted if c not in names]
    if missing:
        raise ConfigError(f"ParquetSource: columns {missing} are not in {layout.obj.url!r}, whose "
                          f"columns are {names}")
    return wanted


def check_schemas(layouts: Sequence[FileLayout], columns: Sequence[str]) -> dict[str, Any]:
    """The Arrow type of each column; CorruptSourceError naming both files and the column if
    a file lacks a column of the first file, or holds it with another type. A column of
    type ``null`` (all its values null, as a writer infers for an empty chunk) agrees with
    any type.
    """
    pa = pyarrow()
    first = layouts[0]
    types: dict[str, Any] = {c: first.schema.field(c).type for c in columns}
    owner = {c: first for c in columns}
    for other in layouts[1:]:
        for c in columns:
            idx = other.schema.get_field_index(c)
            if idx < 0:
                raise CorruptSourceError(
                    f"column {c!r} is in {first.obj.url!r} but not in {other.obj.url!r}: the files of one "
                    "source must share their columns; pass columns=[...] to read only common ones")
            a, b = types[c], other.schema.field(idx).type
            if pa.types.is_null(a) and not pa.types.is_null(b):
                types[c], owner[c] = b, other
            elif a != b and not pa.types.is_null(b):
                raise CorruptSourceError(
                    f"column {c!r} is {a} in {owner[c].obj.url!r} but {b} in {other.obj.url!r}: the files "
                    "of one source must hold each column with one type; rewrite one of them (or cast "
                    "it) or read them as two sources")
    return types
