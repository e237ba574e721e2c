"""Shard lists: brace patterns, globs and exact paths, locally or behind a URL.

``"shards/{000000..000127}.tar"`` expands as the ``webdataset`` library and bash do
(a numeric range keeps the width of its first bound; ``{a,b}`` lists alternatives);
each result may then be a glob (``*``, ``?``, ``[``), expanded in sorted order. Every
shard comes back with its size and a version tag (``mtime_ns`` for local files, the
ETag or generation for objects), which is what a shard's cached index is keyed by.

Example:
    >>> expand_braces("train-{00..02}-of-{a,b}.tfrecord")[:3]
    ['train-00-of-a.tfrecord', 'train-00-of-b.tfrecord', 'train-01-of-a.tfrecord']
"""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Mapping, Sequence
from typing import Any

from thresher.errors import ConfigError, SourceNotFoundError
from thresher.sources.remote.fs import RemoteObject, expand, is_url, local_path

__all__ = ["Shard", "expand_braces", "list_shards", "shard_version"]

Shard = RemoteObject
_BRACE = re.compile(r"\{([^{}]*)\}")
_RANGE = re.compile(r"^(-?\d+)\.\.(-?\d+)$")
_MAX_EXPANSION = 1_000_000


def expand_braces(pattern: str) -> list[str]:
    """The strings ``pattern`` stands for: ``{lo..hi}`` ranges and ``{a,b,c}`` lists.

    Example:
        >>> expand_braces("{8..10}.tar"), expand_braces("{008..010}.tar")
        (['8.tar', '9.tar', '10.tar'], ['008.tar', '009.tar', '010.tar'])
    """
    m = _BRACE.search(pattern)
    if m is None:
        return [pattern]
    body = m.group(1)
    r = _RANGE.match(body)
    if r is not None:
        lo, hi = int(r.group(1)), int(r.group(2))
        if hi < lo:
            raise ConfigError(f"shard pattern {pattern!r}: the range {{{body}}} runs backwards")
        if hi - lo >= _MAX_EXPANSION:
            raise ConfigError(f"shard pattern {pattern!r}: {{{body}}} names more than "
                              f"{_MAX_EXPANSION} shards")
        width = len(r.group(1)) if r.group(1).startswith("0") else 0
        choices = [str(i).zfill(width) for i in range(lo, hi + 1)]
    elif "," in body:
        choices = body.split(",")
    else:
        raise ConfigError(f"shard pattern {pattern!r}: {{{body}}} is neither a range {{0..9}} "
                          "nor a list {a,b}")
    head, tail = pattern[:m.start()], pattern[m.end():]
    return [s for c in choices for s in expand_braces(head + c + tail)]


def shard_version(path: str) -> str:
    """The version tag of a local file: its modification time in nanoseconds."""
    return str(os.stat(path).st_mtime_ns)


def _local(pattern: str, literal: bool) -> list[Shard]:
    path = os.path.expanduser(local_path(pattern))
    if not literal and glob.has_magic(path):
        found = sorted(p for p in glob.glob(path) if os.path.isfile(p))
        if not found:
            raise SourceNotFoundError(f"the pattern {pattern!r} matches no file")
    else:
        if os.path.isdir(path):
            raise SourceNotFoundError(f"{pattern!r} is a directory; pass the shard files in it "
                                      f"(e.g. {os.path.join(pattern, '*')})")
        if not os.path.isfile(path):
            raise SourceNotFoundError(f"{pattern!r} does not exist")
        found = [path]
    out = []
    for p in found:
        st = os.stat(p)
        out.append(Shard(os.path.abspath(p), int(st.st_size), str(st.st_mtime_ns)))
    return out


def list_shards(patterns: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
                storage_options: Mapping[str, Any] | None = None, *,
                what: str = "shard", literal: bool = False) -> list[Shard]:
    """The shards ``patterns`` name, in the order given (each glob sorted), with sizes and versions.

    ``literal``: the patterns are file names (local ones are not expanded).

    Example:
        >>> import os, tempfile
        >>> d = tempfile.mkdtemp()
        >>> for i in range(3):
        ...     open(os.path.join(d, f"s{i}.tar"), "wb").close()
        >>> [os.path.basename(s.url) for s in list_shards(os.path.join(d, "s{0..1}.tar"))]
        ['s0.tar', 's1.tar']
    """
    items = [patterns] if isinstance(patterns, (str, os.PathLike)) else list(patterns)
    if not items:
        raise ConfigError(f"no {what} files given")
    expanded = [os.fspath(p) for p in items] if literal else [s for p in items for s in expand_braces(os.fspath(p))]
    urls = [p for p in expanded if is_url(p)]
    if urls and len(urls) != len(expanded):
        raise ConfigError(f"{what} patterns mix URLs and local paths: {expanded[:4]}")
    shards = expand(urls, storage_options) if urls else [s for p in expanded for s in _local(p, literal)]
    seen: set[str] = set()
    for s in shards:
        if s.url in seen:
            raise ConfigError(f"{what} file {s.url!r} is named twice by {items!r}")
        seen.add(s.url)
    return shards
