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

__all__ = ["LEAST", "MOST", "descriptor_share"]

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
