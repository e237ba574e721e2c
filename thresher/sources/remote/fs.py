"""Files by URL: which paths are URLs, globs on buckets, byte-range reads, atomic writes.

Local paths are read with ``os.pread``; anything with a ``scheme://`` goes through
fsspec (``s3://`` needs s3fs, ``gs://`` gcsfs; ``memory://``, ``http(s)://`` and
``file://`` come with fsspec itself). fsspec is imported only when a URL is used.

Filesystem objects are made in the process that reads (fsspec caches them per process
and per ``storage_options``), so a source that holds URLs pickles to plain strings.

Example:
    >>> is_url("s3://bucket/train.array_record"), is_url("/data/train.array_record")
    (True, False)
    >>> local_path("file:///data/x.array_record")
    '/data/x.array_record'
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Mapping, Optional, Sequence

from thresher.errors import ConfigError, CorruptSourceError, SourceError, SourceNotFoundError

__all__ = ["RemoteObject", "is_url", "local_path", "filesystem", "expand", "read_range",
           "describe_error"]

_GLOB_CHARS = frozenset("*?[")
StorageOptions = Optional[Mapping[str, Any]]


def is_url(path: str) -> bool:
    """True for ``scheme://...`` other than ``file://`` (those are local paths)."""
    scheme, sep, _ = path.partition("://")
    return bool(sep) and scheme.isidentifier() and scheme not in ("file", "local")


def local_path(path: str) -> str:
    """``path`` without a leading ``file://``."""
    for prefix in ("file://", "local://"):
        if path.startswith(prefix):
            return path[len(prefix):]
    return path


def filesystem(url: str, storage_options: StorageOptions = None) -> tuple[Any, str]:
    """The fsspec filesystem for ``url`` and the path inside it."""
    try:
        import fsspec.core
    except ImportError:
        raise ConfigError(f"reading {url!r} needs fsspec (and s3fs for s3://, gcsfs for gs://): "
                          "pip install 'thresher[remote]'") from None
    try:
        return fsspec.core.url_to_fs(url, **dict(storage_options or {}))
    except ImportError as e:
        raise ConfigError(f"reading {url!r} needs a package fsspec could not import ({e}): "
                          "pip install 'thresher[remote]'") from None
    except (TypeError, ValueError) as e:
        raise ConfigError(f"cannot open {url!r} with storage_options "
                          f"{sorted(dict(storage_options or {}))}: {e}") from None


@dataclasses.dataclass(frozen=True)
class RemoteObject:
    """One file: its URL (or local path), size in bytes, and a version tag (ETag or mtime)."""

    url: str
    size: int
    version: str = ""


def _version(info: Mapping[str, Any]) -> str:
    for key in ("ETag", "etag", "md5Hash", "generation", "mtime", "LastModified", "created"):
        if info.get(key) is not None:
            return str(info[key])
    return ""


def expand(patterns: Sequence[str], storage_options: StorageOptions = None) -> list[RemoteObject]:
    """Resolves URLs and URL globs (sorted per glob) to objects with their sizes."""
    out: list[RemoteObject] = []
    for url in patterns:
        fs, path = filesystem(url, storage_options)
        try:
            if _GLOB_CHARS & set(path):
                found = fs.glob(path, detail=True)
                files = sorted((p, i) for p, i in found.items() if i.get("type") != "directory")
                if not files:
                    raise SourceNotFoundError(f"the pattern {url!r} matches no object")
                out.extend(RemoteObject(fs.unstrip_protocol(p), int(i["size"]), _version(i))
                           for p, i in files)
                continue
            info = fs.info(path)
        except SourceError:
            raise
        except Exception as e:
            raise describe_error(e, url, "listing") from e
        if info.get("type") == "directory":
            raise SourceNotFoundError(
                f"{url!r} is a directory; pass the ArrayRecord objects in it (e.g. "
                f"{url.rstrip('/')}/*.array_record*) or use thresher.data_source() for a "
                "prepared dataset directory")
        out.append(RemoteObject(url, int(info["size"]), _version(info)))
    return out


def describe_error(e: BaseException, url: str, what: str) -> SourceError:
    """A SourceError for an exception raised by a filesystem while ``what`` (e.g. reading
    records [3, 9]) of ``url``."""
    text = f"{type(e).__name__}: {e}"
    if isinstance(e, FileNotFoundError):
        return SourceNotFoundError(f"{url!r} does not exist ({what})")
    refused = ("AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "Forbidden",
               "403", "401", "credentials")
    if isinstance(e, PermissionError) or any(s in text for s in refused):
        return SourceError(f"access to {url!r} was refused while {what} ({text}); check the "
                           "credentials (storage_options= or the environment)")
    return SourceError(f"{what} of {url!r} failed: {text}")


def read_range(fs: Any, path: str, url: str, start: int, end: int) -> bytes:
    """Bytes ``[start, end)`` of ``path`` in ``fs`` (a local file when ``fs`` is None);
    CorruptSourceError naming ``url`` if the object is shorter than that."""
    if fs is None:
        fd = os.open(path, os.O_RDONLY)
        try:
            data = os.pread(fd, end - start, start)
        finally:
            os.close(fd)
    else:
        data = fs.cat_file(path, start=start, end=end)
    if len(data) != end - start:
        raise CorruptSourceError(
            f"{url!r} is shorter than expected: asked for bytes [{start}, {end}), got "
            f"{len(data)} (the object was truncated or replaced after it was listed)")
    return bytes(data)
