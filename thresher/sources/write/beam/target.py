"""Where ``thresher.beam.WriteDataset`` writes: a local directory, or a URL on object storage.

A local target is written into a hidden temporary directory beside it and renamed into
place (``sources.prepared.writer``). Object stores have no rename, so for a URL
(``gs://``, ``s3://``, any fsspec URL) every shard writer builds its ArrayRecord file on
local disk and uploads it straight to its final object name (one PUT: an object is
whole or absent, and a retried bundle writes the same bytes to the same name again);
the commit step, once, after every shard, uploads ``dataset_info.json`` last. Until then
readers refuse the prefix (IncompleteDatasetError).

A URL that already holds objects is refused unless ``overwrite=True``: a complete
dataset, or the shards of a write that failed or is still running (shard names depend
on ``num_shards``, so leftovers would not all be replaced and a second writer would mix
its shards with the first one's). With ``overwrite=True`` its ``dataset_info.json`` is
deleted first (readers refuse it from then on) and its other objects after, when the
pipeline is built.

Example:
    >>> import os, tempfile
    >>> from thresher.sources.write.beam.target import open_target
    >>> target = os.path.join(tempfile.mkdtemp(), "ds")
    >>> tmp, spill = open_target(target, None)
    >>> os.path.basename(tmp).startswith(".ds.thresher-tmp-"), spill == os.path.join(tmp, ".spill")
    (True, True)
    >>> open_target("memory://beam-doc/ds", None)[0]
    'memory://beam-doc/ds'
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from thresher.errors import ConfigError
from thresher.sources.formats.prepared.info import SplitInfo
from thresher.sources.formats.prepared.layout import INFO_FILE, TEMP_MARK
from thresher.sources.remote.fs import describe_error, filesystem, is_url, join
from thresher.sources.write.commit import write_text
from thresher.sources.write.local import PrepareArgs, commit_dataset, dataset_info, temp_dir
from thresher.sources.write.spill import remove_tree

__all__ = ["abandon", "commit", "open_target", "temp_prefix"]

StorageOptions = Mapping[str, Any] | None


def temp_prefix(target: str) -> str:
    """A new hidden prefix beside URL ``target`` (for spill and spool files)."""
    parent, _, base = target.rstrip("/").rpartition("/")
    return f"{parent}/.{base}{TEMP_MARK}{uuid.uuid4().hex[:12]}"


def _clear(url: str, storage_options: StorageOptions, overwrite: bool) -> None:
    fs, inner = filesystem(url, storage_options)
    try:
        fs.invalidate_cache()
        old = sorted(fs.find(inner)) if fs.exists(inner) else []
        if not old:
            return
        marker = filesystem(join(url, INFO_FILE), storage_options)[1]
        if not overwrite:
            what = ("a dataset" if marker in old else "no dataset_info.json: the leftovers of a "
                    "write that failed, or of one still running")
            raise ConfigError(f"{url!r} already exists ({len(old)} objects, {what}); pass "
                              "overwrite=True to delete them and write the dataset again")
        if marker in old:
            fs.rm_file(marker)
        fs.rm([p for p in old if p != marker])
    except ConfigError:
        raise
    except Exception as e:
        raise describe_error(e, url, "clearing it for a new dataset") from e


def open_target(target: str, storage_options: StorageOptions, overwrite: bool = False,
                spill_dir: str | None = None) -> tuple[str, str]:
    """Prepares ``target`` for the shard writers; returns (where shards go, spill folder).

    Locally, shards go into a new temporary directory beside ``target``; for a URL,
    to ``target`` itself, after checking (or, with ``overwrite``, clearing) it.
    """
    if is_url(target):
        _clear(target, storage_options, overwrite)
        tmp, hidden = target, temp_prefix(target)
        default_spill = join(hidden, ".spill")
    else:
        tmp = hidden = temp_dir(target)
        default_spill = os.path.join(tmp, ".spill")
    spill = default_spill if spill_dir is None else join(spill_dir, os.path.basename(hidden))
    return tmp, spill


def commit(tmp: str, args: PrepareArgs, infos: Sequence[SplitInfo],
           storage_options: StorageOptions) -> None:
    """Local: ``dataset_info.json`` into ``tmp`` and one rename; URL: ``dataset_info.json`` last."""
    if is_url(tmp):
        write_text(join(tmp, INFO_FILE), dataset_info(args, infos).dumps(), storage_options)
    else:
        commit_dataset(tmp, args, infos)


def abandon(tmp: str | None, spill: str | None, storage_options: StorageOptions) -> None:
    """Removes what a failed ``prepare(beam_runner=)`` wrote: its spill files and its
    temporary directory, or for a URL the shards it uploaded (the URL was empty or
    cleared when the pipeline was built, so they are all its own)."""
    if spill is not None:
        remove_tree(spill, storage_options)
    if tmp is not None:
        remove_tree(tmp, storage_options)
