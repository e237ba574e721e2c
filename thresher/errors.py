"""The exceptions thresher raises: one small hierarchy, every message says what to do.

Every error derives from :class:`ThresherError`, and each one also derives from the
builtin that Grain or TFDS raises for the same case, so code written against them
(``except ValueError:``) keeps catching thresher's errors:

- an invalid option or value: ``ValueError`` (``ConfigError``, ``StateError``, ``SplitError``, ...);
- an argument of the wrong type: ``TypeError`` (``ConfigTypeError``, ``RandomAccessError``);
- a file that is not there: ``FileNotFoundError``; any other unreadable source: ``OSError``;
- a key out of range: ``IndexError`` (Grain) and ``ValueError`` (TFDS);
- an optional dependency that is not installed: ``ModuleNotFoundError`` (``MissingExtraError``, whose
  message names the ``pip install "thresher[extra]"`` to run);
- a failure while the pipeline runs (a worker, a user operation, a cache): ``RuntimeError``.

Example:
    >>> import thresher as th
    >>> try:
    ...     th.Batch(0)
    ... except th.errors.ConfigError as e:
    ...     print("bad option")
    bad option
"""

from __future__ import annotations

__all__ = [
    "BatchError",
    "CacheError",
    "ConfigError",
    "ConfigTypeError",
    "ConversionRequiredError",
    "CorruptSourceError",
    "DatasetInfoError",
    "FeatureError",
    "GeometryError",
    "IncompatibleStateError",
    "IncompleteDatasetError",
    "InvalidStateError",
    "MissingExtraError",
    "RandomAccessError",
    "ReadTimeoutError",
    "RecordKeyError",
    "SourceError",
    "SourceNotFoundError",
    "SplitError",
    "StateError",
    "ThresherError",
    "TransformError",
    "WorkerError",
    "WorkerStuckError",
    "WriteError",
]


class ThresherError(Exception):
    """Base class of every error thresher raises on purpose.

    ``worker_traceback`` is the worker's traceback when the error was raised in a
    worker process (None otherwise).
    """

    worker_traceback: str | None = None


class ConfigError(ThresherError, ValueError):
    """An option or argument is invalid (negative batch size, shard_index >= shard_count, ...)."""


class ConfigTypeError(ConfigError, TypeError):
    """An argument has the wrong type (a seed that is not an int, ...); also a ``TypeError``."""


class SourceError(ThresherError, OSError):
    """A data source cannot be opened or read; the message names the file."""


class SourceNotFoundError(SourceError, FileNotFoundError):
    """A path or glob names no existing file."""


class WriteError(SourceError):
    """A file could not be written (a full disk, a quota, a file-size limit, permissions).

    An ``OSError`` whose ``errno`` is the system's (``errno.ENOSPC`` for a full disk) and
    whose ``filename`` is the file being written; nothing was left at that path.
    """


class CorruptSourceError(SourceError, ValueError):
    """A file exists but is not a readable ArrayRecord file (another format, truncated, corrupt)."""


class RecordKeyError(ThresherError, IndexError, ValueError):
    """A record key is outside ``[0, len(source))``; the message gives the key and the length.

    Also an ``IndexError`` (what Grain and Python sequences raise) and a ``ValueError`` (what a
    TFDS data source raises)."""


class TransformError(ThresherError, RuntimeError):
    """A user operation raised; the message names the operation, record key and position.

    The original exception is chained as ``__cause__``. ``record_key`` and
    ``position`` name the element when the error is about one (else None).
    """

    def __init__(self, message: str = "", *, record_key: int | None = None,
                 position: int | None = None) -> None:
        super().__init__(message)
        self.record_key = record_key
        self.position = position


class BatchError(ThresherError, ValueError):
    """Elements of one batch cannot be stacked (different structure, shapes or dtypes)."""


class StateError(ThresherError, ValueError):
    """Base class of the errors raised by ``set_state``."""


class InvalidStateError(StateError):
    """A state dict is malformed: missing fields, wrong types, unknown version."""


class IncompatibleStateError(StateError):
    """A state was saved by a loader that defines a different global stream.

    The message lists what differs (source length, shuffle, seed, epochs, operations).
    """


class GeometryError(StateError):
    """A state was saved under another shard geometry and cannot be converted exactly."""


class SplitError(ThresherError, ValueError):
    """A split string or ReadInstruction is invalid; the message quotes it."""


class FeatureError(ThresherError, ValueError):
    """A feature spec is invalid, or a value does not match its feature.

    The message names the feature (``'image'``, ``'meta/id'``) and, when writing, the
    split and example index.
    """


class DatasetInfoError(CorruptSourceError):
    """A prepared dataset's ``dataset_info.json`` is unreadable, incomplete or inconsistent
    with the files beside it (a missing field, shard lengths that disagree, a newer format).
    """


class IncompleteDatasetError(SourceError):
    """A directory is a ``thresher.prepare`` output that was never finished (the writer was
    interrupted or is still running); it is not a dataset. Rerun ``prepare``.
    """


class WorkerError(ThresherError, RuntimeError):
    """A worker process died or failed; the message names the worker and its exit code.

    For a worker that died, these attributes are set (None when unknown): ``worker`` (its
    index), ``pid``, ``exit_code`` (negative: the signal that ended it), ``positions`` (the
    chunk it was computing, [start, stop)) and ``record_keys`` (that chunk's first keys).
    """

    worker: int | None = None
    pid: int | None = None
    exit_code: int | None = None
    positions: tuple[int, int] | None = None
    record_keys: list[int] | None = None


class WorkerStuckError(WorkerError):
    """A worker did not deliver a chunk within ``worker_timeout_s``: it hangs (stopped, deadlocked, a
    read that never returns). The message gives the worker and its pid, the chunk's positions and
    first record keys, how long it waited and the worker's Python stack; the workers are stopped.

    Attributes (None when unknown): ``worker`` (its index), ``pid``, ``positions`` ([start, stop)),
    ``record_keys`` (the chunk's first keys), ``stuck_s`` (seconds waited), ``stack`` (the worker's
    Python stack as faulthandler printed it, None if the worker could not answer).
    """

    def __init__(self, message: str = "", *, worker: int | None = None, pid: int | None = None,
                 positions: tuple[int, int] | None = None, record_keys: list[int] | None = None,
                 stuck_s: float | None = None, stack: str | None = None) -> None:
        super().__init__(message)
        self.worker, self.pid, self.positions = worker, pid, positions
        self.record_keys, self.stuck_s, self.stack = record_keys, stuck_s, stack


class CacheError(ThresherError, RuntimeError):
    """A Dataset cache is past its size limit, or an on-disk cache belongs to another pipeline."""


class RandomAccessError(ThresherError, TypeError):
    """``len(ds)`` or ``ds[i]`` on a Dataset that an operation (filter, pack) made iterable-only;
    the message names the operation."""


class ReadTimeoutError(SourceError, TimeoutError):
    """Reads on threads did not return within ``ReadOptions.timeout_s``; also a ``TimeoutError``.

    The message names the record keys still being read and the reading threads' Python stacks.
    ``record_keys`` holds those keys and ``stacks`` the stacks (empty when unknown).
    """

    def __init__(self, message: str = "", *, record_keys: list[int] | None = None,
                 stacks: list[str] | None = None) -> None:
        super().__init__(message)
        self.record_keys = [] if record_keys is None else record_keys
        self.stacks = [] if stacks is None else stacks


class ConversionRequiredError(SourceError):
    """A dataset is stored in a format without random access (TFDS's tfrecord shards); the
    message names the command that converts it (``thresher convert <dir>``)."""


class MissingExtraError(ThresherError, ModuleNotFoundError):
    """An optional dependency is not installed; the message names the ``pip install "thresher[extra]"``
    that installs it. Also a ``ModuleNotFoundError`` (``name`` is the missing module), so
    ``except ImportError:`` keeps working. Raised by :func:`thresher._optional.require`.
    """
