"""Where an on-disk cache's files live: a local folder or a bucket (any fsspec URL).

The few file operations ``cache_files`` needs, each for a local path (``os``) or a URL
(fsspec, through ``thresher.sources.remote``): a part file is written on local disk and
uploaded whole when complete (one PUT: readers see all of it or nothing), JSON files
are written whole (a temp file renamed locally, one upload for a URL), and a cache is
committed by its sidecar, written last. A part in a bucket is identified by its size
and version (ETag, generation or creation time, which change when it is rewritten);
its digest is checked when the store gives no version.

Example:
    >>> import os, tempfile
    >>> from thresher.dataset.cache_store import CacheStore
    >>> store = CacheStore()
    >>> path = os.path.join(tempfile.mkdtemp(), "c.array_record.json")
    >>> store.write_json(path, {"n": 1})
    >>> store.exists(path), store.read_json(path)
    (True, {'n': 1})
    >>> os.path.basename(store.sibling(path, "p0")), CacheStore().sibling("s3://b/c/x.json", "p0")
    ('p0', 's3://b/c/p0')
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Iterator, Mapping
from typing import Any

from thresher.errors import CacheError, SourceError
from thresher.sources.remote.fs import expand, filesystem, is_url
from thresher.sources.write import commit

__all__ = ["CacheStore", "file_digest"]


def file_digest(path: str) -> str:
    """The BLAKE2b-128 hex digest of a local file's bytes.

    Example:
        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "f")
        >>> _ = open(path, "wb").write(b"abc")
        >>> len(file_digest(path))
        32
    """
    h = hashlib.blake2b(digest_size=16)
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


class CacheStore:
    """File operations on local paths and URLs; ``storage_options`` go to fsspec for URLs.

    Example:
        >>> store = CacheStore()
        >>> store.write_json("memory://cache-store-doc/c.json", {"parts": []})
        >>> store.exists("memory://cache-store-doc/c.json"), store.version("memory://cache-store-doc/c.json") != ""
        (True, True)
        >>> store.remove("memory://cache-store-doc/c.json")
    """

    def __init__(self, storage_options: Mapping[str, Any] | None = None) -> None:
        self.storage_options = dict(storage_options or {})

    def exists(self, path: str) -> bool:
        """True if the file or object exists (asked afresh: listings are not cached)."""
        if not is_url(path):
            return os.path.exists(path)
        try:
            fs, inner = filesystem(path, self.storage_options)
            fs.invalidate_cache(inner)
            return commit.exists(path, self.storage_options)
        except SourceError as e:
            raise CacheError(f"cannot look up the cache file {path!r}: {e}") from e

    def read_json(self, path: str) -> dict[str, Any]:
        """A JSON object, or CacheError naming the file and what to do."""
        try:
            data = json.loads(commit.read_text(path, self.storage_options))
        except (OSError, ValueError, SourceError) as e:
            raise CacheError(f"the cache file {path!r} is unreadable ({e}); delete it and the "
                             "cache's part files to rebuild") from e
        if not isinstance(data, dict):
            raise CacheError(f"the cache file {path!r} is not a JSON object; delete it to rebuild")
        return data

    def write_json(self, path: str, data: dict[str, Any]) -> None:
        """Writes ``data`` whole (nobody sees a half-written file)."""
        try:
            commit.write_text(path, json.dumps(data), self.storage_options)
        except SourceError as e:
            raise CacheError(f"cannot write the cache file {path!r}: {e}") from e

    def remove(self, path: str) -> None:
        """Deletes a file or object (nothing if it is gone)."""
        if not is_url(path):
            with contextlib.suppress(FileNotFoundError):
                os.remove(path)
            return
        fs, inner = filesystem(path, self.storage_options)
        with contextlib.suppress(FileNotFoundError):
            fs.rm_file(inner)

    @staticmethod
    def sibling(path: str, name: str) -> str:
        """The file ``name`` in the folder (or prefix) of ``path``."""
        if is_url(path):
            return f"{path.rsplit('/', 1)[0]}/{name}"
        return os.path.join(os.path.dirname(os.path.abspath(path)), name)

    @contextlib.contextmanager
    def writing(self, path: str) -> Iterator[str]:
        """The local path to write the part ``path`` at; for a URL, a temporary file that
        is uploaded whole when the block ends without an exception (else nothing is)."""
        try:
            with commit.staging(path, self.storage_options) as local:
                yield local
        except SourceError as e:
            raise CacheError(f"cannot write the cache part {path!r}: {e}") from e

    def version(self, path: str) -> str:
        """The object's version tag ('' for local files, which are checked by digest)."""
        if not is_url(path):
            return ""
        try:
            return expand([path], self.storage_options)[0].version
        except SourceError as e:
            raise CacheError(f"cannot look up the cache part {path!r}: {e}") from e

    def check_part(self, path: str, part: Mapping[str, Any]) -> None:
        """CacheError unless the part at ``path`` is the one its sidecar entry ``part`` describes."""
        if not self.exists(path):
            raise CacheError(f"the cache part {path!r} is missing; delete the cache's sidecar to rebuild")
        if is_url(path):
            obj = expand([path], self.storage_options)[0]
            size, version = obj.size, obj.version
        else:
            size, version = os.path.getsize(path), ""
        if size != part.get("file_bytes"):
            raise CacheError(f"the cache part {path!r} has {size} bytes but was written with "
                             f"{part.get('file_bytes')} (truncated or replaced); delete the cache "
                             "and its sidecar to rebuild")
        if version and part.get("version"):
            if version != part.get("version"):
                raise CacheError(f"the cache part {path!r} was rewritten after its sidecar (version "
                                 f"{version}, written as {part.get('version')}); delete the cache and "
                                 "its sidecar to rebuild")
            return
        if self._digest(path) != part.get("blake2b"):
            raise CacheError(f"the cache part {path!r} does not match the digest in its sidecar (it "
                             "was changed after it was written); delete the cache and its sidecar "
                             "to rebuild")

    def _digest(self, path: str) -> str:
        if not is_url(path):
            return file_digest(path)
        fs, inner = filesystem(path, self.storage_options)
        h = hashlib.blake2b(digest_size=16)
        try:
            with fs.open(inner, "rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    h.update(block)
        except Exception as e:
            raise CacheError(f"cannot read the cache part {path!r} to check it: {e}") from e
        return h.hexdigest()
