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
from collections.abc import Mapping, Sequence
from typing import Any

from thresher._optional import install_command, require
from thresher.errors import ConfigError, CorruptSourceError, MissingExtraError, SourceError, SourceNotFoundError

__all__ = [
    "RemoteObject",
    "describe_error",
    "expand",
    "filesystem",
    "is_url",
    "join",
    "list_names",
    "local_path",
    "read_bytes",
    "read_range",
]

_GLOB_CHARS = frozenset("*?[")
StorageOptions = Mapping[str, Any] | None


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


def join(base: str, *names: str) -> str:
    """``base/name/...``: with ``/`` for URLs, ``os.path.join`` for local paths."""
    if not is_url(base):
        return os.path.join(base, *names)
    return "/".join([base.rstrip("/"), *names])


def filesystem(url: str, storage_options: StorageOptions = None) -> tuple[Any, str]:
    """The fsspec filesystem for ``url`` and the path inside it.

    ``gs://`` with an ``endpoint_url`` (an emulator, such as the range server of docs/object_storage.md)
    uses gcsfs's JSON-API filesystem: gcsfs's default one first asks a gRPC control plane for the
    bucket's layout, which emulators do not serve (each call then waits out a 60 s time-out unless
    ``GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT=false``). Real GCS (no endpoint) keeps gcsfs's default.
    """
    fsspec_core = require("fsspec.core", f"reading {url!r}")
    options = dict(storage_options or {})
    try:
        if url.startswith(("gs://", "gcs://")) and options.get("endpoint_url"):
            gcs = require("gcsfs.core", f"reading {url!r}")
            return gcs.GCSFileSystem(**options), url.split("://", 1)[1].rstrip("/")
        return fsspec_core.url_to_fs(url, **options)
    except ImportError as e:
        raise MissingExtraError(f"reading {url!r} needs a package fsspec could not import ({e}): "
                                f"{install_command('remote')}", name=e.name) from None
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


_LOOKUP_THREADS = 16
"""Exact URLs a listing did not find are looked up this many at a time."""


def expand(patterns: Sequence[str], storage_options: StorageOptions = None) -> list[RemoteObject]:
    """Resolves URLs and URL globs (sorted per glob) to objects with their sizes.

    Exact URLs that share a parent in a bucket are looked up with one listing of that
    parent; the others (``http(s)://``, whose servers list nothing, or ones the listing
    missed) with a request each, ``_LOOKUP_THREADS`` at a time. The order is the order given;
    a URL that cannot be looked up raises the error of the first such URL.
    """
    found: dict[str, RemoteObject] = {}
    parents: dict[str, list[str]] = {}
    for url in patterns:
        if not _GLOB_CHARS & set(url) and not url.startswith(("http://", "https://")):
            parents.setdefault(url.rsplit("/", 1)[0], []).append(url)
    for parent, urls in parents.items():
        if len(urls) > 1:
            found.update(_listing(parent, storage_options))
    alone = [url for url in dict.fromkeys(patterns) if url not in found and not _GLOB_CHARS & set(url)]
    looked: dict[str, RemoteObject | BaseException] = {}
    if len(alone) > 1:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(min(_LOOKUP_THREADS, len(alone)), thread_name_prefix="thresher-lookup") as pool:
            looked = dict(zip(alone, pool.map(lambda u: _looked_up(u, storage_options), alone), strict=True))
    out: list[RemoteObject] = []
    for url in patterns:  # in order: the first pattern that fails is the one named
        if url in looked:
            result = looked[url]
            if isinstance(result, BaseException):
                raise result
            out.append(result)
        elif url in found:
            out.append(found[url])
        elif _GLOB_CHARS & set(url):
            out.extend(_glob(url, storage_options))
        else:
            out.append(_one(url, storage_options))
    return out


def _looked_up(url: str, storage_options: StorageOptions) -> RemoteObject | BaseException:
    try:
        return _one(url, storage_options)
    except Exception as e:  # raised by expand, in the order given
        return e


def _listing(parent: str, storage_options: StorageOptions) -> dict[str, RemoteObject]:
    fs, path = filesystem(parent, storage_options)
    try:
        entries = fs.ls(path, detail=True)
    except Exception:
        return {}  # each URL is then looked up alone, with its own error
    return {fs.unstrip_protocol(i["name"]): RemoteObject(fs.unstrip_protocol(i["name"]),
                                                         int(i["size"]), _version(i))
            for i in entries if i.get("type") != "directory"}


def _glob(url: str, storage_options: StorageOptions) -> list[RemoteObject]:
    fs, path = filesystem(url, storage_options)
    try:
        found = fs.glob(path, detail=True)
    except Exception as e:
        raise describe_error(e, url, "listing") from e
    files = sorted((p, i) for p, i in found.items() if i.get("type") != "directory")
    if not files:
        raise SourceNotFoundError(f"the pattern {url!r} matches no object")
    return [RemoteObject(fs.unstrip_protocol(p), int(i["size"]), _version(i)) for p, i in files]


def _one(url: str, storage_options: StorageOptions) -> RemoteObject:
    fs, path = filesystem(url, storage_options)
    try:
        info = fs.info(path)
    except Exception as e:
        raise describe_error(e, url, "looking it up") from e
    if info.get("type") == "directory":
        raise SourceNotFoundError(
            f"{url!r} is a directory; pass the ArrayRecord objects in it (e.g. "
            f"{url.rstrip('/')}/*.array_record*) or use thresher.data_source() for a "
            "prepared dataset directory")
    return RemoteObject(url, int(info["size"]), _version(info))


def list_names(url: str, storage_options: StorageOptions = None) -> list[str] | None:
    """The names of the objects directly under ``url``; None if there are none at all."""
    fs, path = filesystem(url, storage_options)
    try:
        names = fs.ls(path, detail=False)
    except FileNotFoundError:
        return None
    except Exception as e:
        raise describe_error(e, url, "listing") from e
    return [n.rstrip("/").rsplit("/", 1)[-1] for n in names] or None


def read_bytes(url: str, storage_options: StorageOptions = None) -> bytes:
    """The whole object at ``url``."""
    fs, path = filesystem(url, storage_options)
    try:
        return bytes(fs.cat_file(path))
    except Exception as e:
        raise describe_error(e, url, "reading") from e


def describe_error(e: BaseException, url: str, what: str) -> SourceError:
    """A SourceError for an exception a filesystem raised while ``what`` (e.g. "reading
    records [3, 9] of 's3://b/x'", or "listing") was done with ``url``."""
    text = f"{type(e).__name__}: {e}"
    if isinstance(e, FileNotFoundError):
        return SourceNotFoundError(f"{url!r} does not exist ({what})")
    refused = ("AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "Forbidden",
               "403", "401", "credentials")
    if isinstance(e, PermissionError) or any(s in text for s in refused):
        return SourceError(f"access to {url!r} was refused ({what}: {text}); check the "
                           "credentials (storage_options= or the environment)")
    where = "" if repr(url) in what else f" ({url!r})"
    return SourceError(f"{what} failed{where}: {text}")


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
