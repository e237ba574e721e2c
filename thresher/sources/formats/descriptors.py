"""How many files a source keeps open or mapped per process: a share of the descriptor limit.

Readers that keep a file open (array_record's reader) or mapped (Python's mmap holds a
descriptor) cost one descriptor each. A source keeps a quarter of the process's soft limit
(``ulimit -n``) of them, at most ``MOST``, at least ``LEAST``: the rest is left to everything
else the process opens (sockets, worker pipes, shared memory, the user's own files).

Example:
    >>> from thresher.sources.formats.descriptors import descriptor_share
    >>> 16 <= descriptor_share() <= 4096
    True
"""

from __future__ import annotations

import errno

from thresher.errors import SourceError

__all__ = ["LEAST", "MOST", "descriptor_share", "no_descriptor_error", "out_of_descriptors"]

MOST = 4096
LEAST = 16
_NO_LIMIT_READ = 256  # where the limit cannot be read (no `resource` module: Windows)


def descriptor_share(most: int = MOST) -> int:
    """A quarter of this process's soft descriptor limit, between ``LEAST`` and ``most``."""
    try:
        import resource
    except ImportError:
        return min(most, _NO_LIMIT_READ)
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if soft == resource.RLIM_INFINITY:
        return most
    return min(most, max(LEAST, soft // 4))


def out_of_descriptors(error: BaseException) -> bool:
    """Whether ``error`` says the process (or the system) has no descriptor left to open a file.

    pyarrow raises its own errors with the system's text, so the text counts too.

    Example:
        >>> out_of_descriptors(OSError(24, "Too many open files")), out_of_descriptors(ValueError("bad"))
        (True, False)
    """
    if isinstance(error, OSError) and error.errno in (errno.EMFILE, errno.ENFILE):
        return True
    return "Too many open files" in str(error)


def no_descriptor_error(path: str, error: BaseException) -> SourceError:
    """The error for ``path``, which could not be opened for want of a descriptor: it says so
    and what to do (never that the file is corrupt).

    Example:
        >>> str(no_descriptor_error("a.parquet", OSError(24, "Too many open files"))).split(":")[0]
        "'a.parquet' cannot be opened"
    """
    return SourceError(f"{path!r} cannot be opened: this process has too many files open "
                       f"({type(error).__name__}: {error}); raise the limit (ulimit -n) or close other files")
