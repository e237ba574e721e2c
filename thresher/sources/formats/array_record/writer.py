"""Writing ArrayRecord files atomically: a file appears complete or not at all."""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from collections.abc import Iterable
from types import TracebackType
from typing import Any, Union

from thresher.errors import ConfigError, SourceError

__all__ = ["ArrayRecordWriter", "write_array_record"]

PathLike = Union[str, "os.PathLike[str]"]


class ArrayRecordWriter:
    """Writes records (bytes) to an ArrayRecord file, atomically.

    Records go to a temporary file beside the target; ``close()`` (or leaving the
    ``with`` block without an exception) renames it into place. An exception, a
    crash or Ctrl-C leaves no file at ``path``, so a reader never sees half a file.

    Args:
        path: the file to create (replaced if it exists).
        group_size: records per compressed chunk. 1 (the default) makes random access
            cheapest, which is what a shuffling loader does; larger groups compress
            better and suit sequential reads.
        options: extra array_record writer options, e.g. ``"zstd:3"``.

    Example:
        >>> import tempfile, os
        >>> from thresher.sources import ArrayRecordWriter, ArrayRecordSource
        >>> path = os.path.join(tempfile.mkdtemp(), "train.array_record")
        >>> with ArrayRecordWriter(path) as w:
        ...     for i in range(3):
        ...         w.write(b"record %d" % i)
        >>> ArrayRecordSource(path)[1]
        b'record 1'
    """

    def __init__(self, path: PathLike, *, group_size: int = 1, options: str = "") -> None:
        if int(group_size) < 1:
            raise ConfigError(f"group_size must be >= 1, got {group_size}")
        self._path = os.fspath(path)
        directory = os.path.dirname(os.path.abspath(self._path))
        if not os.path.isdir(directory):
            raise SourceError(f"cannot write {self._path!r}: directory {directory!r} does not exist")
        fd, self._tmp = tempfile.mkstemp(
            prefix=f".{os.path.basename(self._path)}.", suffix=".tmp", dir=directory
        )
        os.close(fd)
        from array_record.python import array_record_module

        opts = f"group_size:{int(group_size)}" + (f",{options}" if options else "")
        self._writer: Any = array_record_module.ArrayRecordWriter(self._tmp, opts)
        self._count = 0
        self._closed = False

    @property
    def count(self) -> int:
        """The number of records written so far."""
        return self._count

    def write(self, record: bytes) -> None:
        """Appends one record."""
        if self._closed:
            raise SourceError(f"write to {self._path!r} after close()")
        if not isinstance(record, (bytes, bytearray, memoryview)):
            raise TypeError(
                f"ArrayRecord records are bytes; got {type(record).__name__} for record "
                f"{self._count} of {self._path!r} (encode it first, e.g. arr.tobytes())"
            )
        try:
            self._writer.write(bytes(record))
        except Exception as e:  # array_record reports a failed write(2) as a RuntimeError
            raise self._failed(e) from e
        self._count += 1

    def close(self) -> None:
        """Finishes the file and moves it into place."""
        if self._closed:
            return
        self._closed = True
        try:
            self._writer.close()
        except Exception as e:
            self._remove_tmp()
            raise self._failed(e) from e
        os.replace(self._tmp, self._path)

    def _failed(self, e: Exception) -> OSError:
        return OSError(errno.EIO, f"writing ArrayRecord file {self._path!r} failed after {self._count} records "
                                  f"({e}); is the disk full or a file-size limit reached? Nothing was written "
                                  f"at {self._path!r}")

    def _remove_tmp(self) -> None:
        if os.path.exists(self._tmp):
            os.remove(self._tmp)

    def abort(self) -> None:
        """Discards everything written; ``path`` is left untouched."""
        if self._closed:
            return
        self._closed = True
        try:
            self._writer.close()
        except Exception:
            pass  # the file is discarded anyway; a failed close (disk full) must not hide the cause
        finally:
            self._remove_tmp()

    def __enter__(self) -> ArrayRecordWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()

    def __del__(self) -> None:
        if not getattr(self, "_closed", True):
            with contextlib.suppress(Exception):
                self.abort()


def write_array_record(
    path: PathLike, records: Iterable[bytes], *, group_size: int = 1, options: str = ""
) -> int:
    """Writes ``records`` to one ArrayRecord file atomically; returns how many were written.

    Example:
        >>> import tempfile, os
        >>> from thresher.sources import write_array_record
        >>> write_array_record(os.path.join(tempfile.mkdtemp(), "x.array_record"), [b"a", b"b"])
        2
    """
    with ArrayRecordWriter(path, group_size=group_size, options=options) as w:
        for r in records:
            w.write(r)
        return w.count
