"""The hidden temporaries of atomic writes: owned, public once renamed, swept when stale.

Every thresher writer builds its result under a hidden name beside the target and renames
it into place when complete (``write_array_record``, ``prepare``, ``thresher convert``).
This module makes those names and keeps three promises about them:

- **Owned.** A temporary is named ``.{target}.thresher-tmp-{pid}@{host}.{random}``: the
  process that writes it can be told apart from a dead one.
- **Stale ones are swept.** A ``kill -9`` leaves its temporary behind; the next write of the
  same target removes the ones nobody writes any more: their process is gone (same host), or
  nothing touched them for :data:`STALE_AFTER_S` (another host, or a name without an owner,
  written by an older thresher). Each removal is logged (logger ``thresher``, WARNING).
  ``ArrayRecordWriter`` lists a directory at most once a minute per process (a dictionary of
  directories swept, the module's one process-wide registry); ``prepare`` and ``convert`` sweep
  every time.
- **Public once renamed.** ``mkstemp`` and ``mkdtemp`` create 0600 files and 0700
  directories; :func:`publish_mode` gives them what ``open()`` and ``mkdir`` would have
  (``0o666 & ~umask``, ``0o777 & ~umask``) before the rename, so a dataset prepared by one
  user, job or container can be read by another.

A failed write (a full disk, a quota) raises :class:`~thresher.errors.WriteError`, an
``OSError`` that keeps the system's ``errno`` (``ENOSPC``) and names the file.

Example:
    >>> import os, tempfile
    >>> from thresher.sources.temp_files import current_umask, new_temp_file, publish_mode, sweep_stale
    >>> d = tempfile.mkdtemp()
    >>> target = os.path.join(d, "x.array_record")
    >>> tmp = new_temp_file(target)
    >>> os.path.basename(tmp).startswith(".x.array_record.thresher-tmp-")
    True
    >>> publish_mode(tmp); os.replace(tmp, target)
    >>> oct(os.stat(target).st_mode & 0o777) == oct(0o666 & ~current_umask())
    True
    >>> sweep_stale(target)  # nothing stale: the writer (this process) is alive
    []
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import re
import shutil
import socket
import tempfile
import time
from collections.abc import Collection, Iterator

from thresher.errors import WriteError

__all__ = [
    "STALE_AFTER_S",
    "TEMP_MARK",
    "current_umask",
    "new_temp_dir",
    "new_temp_file",
    "publish_mode",
    "sweep_stale",
    "write_error",
    "writing",
]

TEMP_MARK = ".thresher-tmp-"
OLD_MARK = ".thresher-old-"
#: A temporary whose owner cannot be checked (another host, an older thresher's name) is
#: stale when neither it nor anything directly in it was modified for this long.
STALE_AFTER_S = 24 * 3600.0

_log = logging.getLogger("thresher")
# The one process-wide registry here: when this process last swept each directory (sweep_stale's every_s).
_SWEPT: dict[str, float] = {}
_OWNER = re.compile(r"(\d+)@([A-Za-z0-9_-]*)\.")
_LEGACY = re.compile(r"[a-z0-9_]{8}\.tmp")  # an older thresher's mkstemp name: .{target}.XXXXXXXX.tmp
_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EACCES, errno.EIO)


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", socket.gethostname())[:48]


def current_umask() -> int:
    """This process's umask, read without changing it (``/proc``), else by setting it back."""
    with contextlib.suppress(OSError, ValueError), open("/proc/self/status") as f:
        for line in f:
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    mask = os.umask(0o22)  # not thread-safe for the instant between the two calls
    os.umask(mask)
    return mask


def publish_mode(path: str) -> None:
    """Gives the ``mkstemp`` file or ``mkdtemp`` directory ``path`` the mode a plain
    ``open()`` / ``mkdir`` would have made (``0o666`` / ``0o777`` less the umask)."""
    full = 0o777 if os.path.isdir(path) else 0o666
    os.chmod(path, full & ~current_umask())


def _prefix(target: str, mark: str = TEMP_MARK) -> str:
    return f".{os.path.basename(target)}{mark}{os.getpid()}@{_host()}."


def new_temp_file(target: str, suffix: str = ".tmp") -> str:
    """A new empty temporary file beside ``target``, owned by this process (see module doc)."""
    directory = os.path.dirname(os.path.abspath(target))
    with writing(target):
        fd, tmp = tempfile.mkstemp(prefix=_prefix(target), suffix=suffix, dir=directory)
        os.close(fd)
    return tmp


def new_temp_dir(target: str, mark: str = TEMP_MARK) -> str:
    """A new temporary directory beside ``target``, owned by this process, with the mode
    ``mkdir`` would give (its parent is created if needed)."""
    parent = os.path.dirname(os.path.abspath(target))
    with writing(target):
        os.makedirs(parent, exist_ok=True)
        tmp = tempfile.mkdtemp(prefix=_prefix(target, mark), dir=parent)
        publish_mode(tmp)
    return tmp


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: someone else's live process
        return True
    return True


def _age_s(path: str, now: float) -> float:
    """Seconds since ``path`` (or, for a directory, anything directly in it) was modified."""
    latest = os.lstat(path).st_mtime
    if os.path.isdir(path) and not os.path.islink(path):
        with os.scandir(path) as entries:
            for e in entries:
                with contextlib.suppress(OSError):
                    latest = max(latest, e.stat(follow_symlinks=False).st_mtime)
    return now - latest


def _why_stale(name: str, base: str, path: str, target_exists: bool, now: float,
               max_age_s: float) -> str | None:
    """Why the entry ``name`` is a stale temporary of ``base`` (None: not one, or in use)."""
    head = f".{base}"
    if not name.startswith(head):
        return None
    rest = name[len(head):]
    if rest.startswith(OLD_MARK):  # a replaced dataset not yet deleted: only once the new one is there
        if not target_exists:
            return None
        rest = rest[len(OLD_MARK):]
    elif rest.startswith(TEMP_MARK):
        rest = rest[len(TEMP_MARK):]
    elif not (rest.startswith(".") and _LEGACY.fullmatch(rest[1:])):
        return None
    owner = _OWNER.match(rest)
    if owner and owner.group(2) == _host() and not _alive(int(owner.group(1))):
        return f"its writer, process {owner.group(1)} on this host, is gone"
    try:
        age = _age_s(path, now)
    except OSError:
        return None
    if age > max_age_s:
        return f"untouched for {age / 3600:.1f} h (> {max_age_s / 3600:g} h)"
    return None


def sweep_stale(target: str, *, also: Collection[str] = (), max_age_s: float = STALE_AFTER_S,
                every_s: float | None = None) -> list[str]:
    """Removes the stale temporaries that interrupted writes of ``target`` (and of the
    names ``also``, in the same directory) left beside it; returns their paths.

    Temporaries still being written (their process is alive, or recently modified) are kept.
    With ``every_s``, a directory this process swept less than ``every_s`` seconds ago is not
    listed again (a loop that writes thousands of files into one directory lists it once a
    minute, not once a file).
    """
    directory = os.path.dirname(os.path.abspath(target))
    if every_s is not None:
        last = _SWEPT.get(directory)
        if last is not None and time.monotonic() - last < every_s:
            return []
        if len(_SWEPT) > 4096:
            _SWEPT.clear()
        _SWEPT[directory] = time.monotonic()
    bases = {os.path.basename(target), *also}
    now = time.time()
    removed = []
    try:
        entries = [e.name for e in os.scandir(directory) if e.name.startswith(".")]
    except OSError:
        return []
    for name in entries:
        path = os.path.join(directory, name)
        for base in bases:
            why = _why_stale(name, base, path, os.path.exists(os.path.join(directory, base)),
                             now, max_age_s)
            if why is None:
                continue
            try:
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.rmtree(path)
                else:
                    os.remove(path)
            except OSError as e:
                _log.warning("thresher: could not remove the stale temporary %s (%s)", path, e)
                break
            _log.warning("thresher: removed %s, a temporary that an interrupted write of %s left "
                         "behind (%s)", path, os.path.join(directory, base), why)
            removed.append(path)
            break
    return removed


def write_error(e: BaseException, path: str, what: str = "writing", detail: str = "") -> WriteError:
    """A WriteError for the failure ``e`` while writing ``path``, keeping its errno (also when
    a library reported it only as text, e.g. array_record's "No space left on device")."""
    code = getattr(e, "errno", None) if isinstance(e, OSError) else None
    if not code:
        text = str(e)
        code = next((c for c in _ERRNOS if os.strerror(c) in text), errno.EIO)
    reason = os.strerror(code)
    advice = {errno.ENOSPC: "free some space or write elsewhere",
              errno.EDQUOT: "free some space or raise the quota",
              errno.EFBIG: "use more, smaller shards (num_shards) or raise the file-size limit",
              errno.EROFS: "write to a writable directory",
              errno.EACCES: "check the directory's permissions"}.get(code, "check the disk")
    return WriteError(code, f"{what} {path!r} failed{detail}: {reason} ({e}); {advice}. "
                            f"Nothing was written at {path!r}", path)


@contextlib.contextmanager
def writing(path: str, what: str = "writing") -> Iterator[None]:
    """Turns an ``OSError`` raised in the block into a WriteError naming ``path``."""
    try:
        yield
    except WriteError:
        raise
    except OSError as e:
        if isinstance(e, (FileNotFoundError, IsADirectoryError, NotADirectoryError)):
            raise
        raise write_error(e, path, what) from e
