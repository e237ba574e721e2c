"""Writing to local paths or URLs so that readers never see a half-written result.

Object stores have no atomic rename, so a result that is several objects is committed
by writing one marker object last (a prepared dataset's ``dataset_info.json``, a cache's
JSON sidecar): readers refuse what has no marker. Each object itself is written whole
by one upload (a PUT is atomic: readers see the old object or the new one). Locally,
files are written to a temporary name and renamed.

Files are built on local disk first (``staging``) and uploaded when complete.

Example:
    >>> import os, tempfile
    >>> from thresher.sources.write.commit import exists, read_text, write_text
    >>> path = os.path.join(tempfile.mkdtemp(), "meta.json")
    >>> write_text(path, '{"n": 1}')
    >>> exists(path), read_text(path)
    (True, '{"n": 1}')
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from typing import Any

from thresher.errors import ConfigError, SourceError
from thresher.sources.remote.fs import describe_error, filesystem, is_url, join, read_bytes
from thresher.sources.temp_files import writing

__all__ = ["exists", "publish_tree", "read_text", "staging", "write_text"]

StorageOptions = Mapping[str, Any] | None


def exists(path: str, storage_options: StorageOptions = None) -> bool:
    """True if the file or object (or a directory / prefix) exists."""
    if not is_url(path):
        return os.path.exists(path)
    fs, inner = filesystem(path, storage_options)
    try:
        return bool(fs.exists(inner))
    except Exception as e:
        raise describe_error(e, path, "looking it up") from e


def read_text(path: str, storage_options: StorageOptions = None) -> str:
    """The UTF-8 text of a file or object."""
    if is_url(path):
        return read_bytes(path, storage_options).decode("utf-8")
    with open(path, encoding="utf-8") as f:
        return f.read()


def _upload(local: str, url: str, storage_options: StorageOptions) -> None:
    fs, inner = filesystem(url, storage_options)
    try:
        fs.put_file(local, inner)
    except Exception as e:
        raise describe_error(e, url, "uploading") from e


def write_text(path: str, text: str, storage_options: StorageOptions = None) -> None:
    """Writes ``text`` whole: a temp file renamed locally, one upload for a URL."""
    if is_url(path):
        fs, inner = filesystem(path, storage_options)
        try:
            fs.pipe_file(inner, text.encode("utf-8"))
        except Exception as e:
            raise describe_error(e, path, "writing") from e
        return
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        with writing(path), open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


@contextlib.contextmanager
def staging(target: str, storage_options: StorageOptions = None) -> Iterator[str]:
    """The local path to write ``target`` at: ``target`` itself when it is local; for a URL,
    a temporary file that is uploaded when the block ends without an exception."""
    if not is_url(target):
        yield target
        return
    folder = tempfile.mkdtemp(prefix="thresher-upload-")
    try:
        local = os.path.join(folder, target.rstrip("/").rsplit("/", 1)[-1])
        yield local
        if os.path.exists(local):
            _upload(local, target, storage_options)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def publish_tree(local_dir: str, url: str, storage_options: StorageOptions = None, *,
                 last: str, overwrite: bool = False) -> None:
    """Uploads the files of ``local_dir`` under ``url``, the file named ``last`` at the end.

    An existing ``url`` is refused unless ``overwrite``; then its ``last`` object is
    deleted first (readers refuse it from then on) and its other objects after.
    """
    fs, inner = filesystem(url, storage_options)
    marker = join(url, last)
    try:
        old = fs.find(inner) if fs.exists(inner) else []
        if old and not overwrite:
            raise ConfigError(f"{url!r} already exists ({len(old)} objects); pass overwrite=True "
                              "to replace it")
        if old:
            if fs.exists(filesystem(marker, storage_options)[1]):
                fs.rm_file(filesystem(marker, storage_options)[1])
            fs.rm(old)
        names = sorted(os.listdir(local_dir))
        if last not in names:
            raise SourceError(f"{local_dir!r} has no {last!r} to commit {url!r} with")
        for name in [n for n in names if n != last] + [last]:
            _upload(os.path.join(local_dir, name), join(url, name), storage_options)
    except (SourceError, ConfigError):
        raise
    except Exception as e:
        raise describe_error(e, url, "publishing") from e
