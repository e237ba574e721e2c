"""Writing ArrayRecord files atomically: a file appears complete or not at all."""

from __future__ import annotations

import os
from collections.abc import Iterable
from types import TracebackType
from typing import Any, Union

from thresher._validate import user_path
from thresher.errors import ConfigError, SourceError, WriteError
from thresher.sources.temp_files import new_temp_file, publish_mode, sweep_stale, write_error

__all__ = ["ArrayRecordWriter", "write_array_record"]

PathLike = Union[str, "os.PathLike[str]"]
#: A directory is listed for stale temporaries at most this often per process.
SWEEP_EVERY_S = 60.0


class ArrayRecordWriter:
    """Writes records (bytes) to an ArrayRecord file, atomically.

    Records go to a hidden temporary file beside the target; ``close()`` (or leaving the
    ``with`` block without an exception) renames it into place, with the mode ``open()``
    would give (``0o666`` less the umask). An exception, a crash or Ctrl-C leaves no file
    at ``path``, so a reader never sees half a file; the temporary that a ``kill -9``
    leaves is removed by the next write of the same ``path`` once its process is gone
    (:mod:`thresher.sources.temp_files`). A failed write (a full disk) raises
    :class:`~thresher.errors.WriteError`, an ``OSError`` with the system's ``errno``.

    Args:
        path: the file to create (replaced if it exists).
        group_size: records per compressed chunk. 1 (the default) makes random access
            cheapest, which is what a shuffling loader does; larger groups compress
            better and suit sequential reads.
        options: extra array_record writer options, e.g. ``"zstd:3"``.
        clean_stale: first remove the stale temporaries of ``path`` that interrupted
            writes left (False when the caller swept the directory already).

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

    def __init__(self, path: PathLike, *, group_size: int = 1, options: str = "",
                 clean_stale: bool = True) -> None:
        if int(group_size) < 1:
            raise ConfigError(f"group_size must be >= 1, got {group_size}")
        self._path = user_path(path)
        directory = os.path.dirname(os.path.abspath(self._path))
        if not os.path.isdir(directory):
            raise SourceError(f"cannot write {self._path!r}: directory {directory!r} does not exist")
        if clean_stale:
            sweep_stale(self._path, every_s=SWEEP_EVERY_S)
        self._tmp = new_temp_file(self._path)
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
        try:
            publish_mode(self._tmp)
            os.replace(self._tmp, self._path)
        except OSError as e:
            self._remove_tmp()
            raise self._failed(e) from e

    def _failed(self, e: Exception) -> WriteError:
        return write_error(e, self._path, "writing the ArrayRecord file",
                           f" after {self._count} records")

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
            try:  # noqa: SIM105 - not contextlib: at interpreter exit its module global may be None
                self.abort()
            except Exception:
                pass


def write_array_record(
    path: PathLike, records: Iterable[bytes], *, group_size: int = 1, options: str = ""
) -> int:
    """Writes ``records`` to one ArrayRecord file atomically; returns how many were written.

    ``path`` may start with ``~`` or hold ``$VAR``s (expanded as a shell would). See
    :class:`ArrayRecordWriter` for the temporary file, its mode and the errors.

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
