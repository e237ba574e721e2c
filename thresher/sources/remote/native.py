"""The C HighwayHash (``_highway.c``): the one built by pip, or built here on first use.

``pip install thresher`` compiles ``_highway.c`` into the package when a C compiler is
there (``setup.py``; the build is optional, so an install never fails for it). Where it
is missing (a source checkout, or an install on a machine without a compiler at the
time), :func:`load` compiles the same file once per machine and Python version with the
compiler Python was built with (``sysconfig``'s ``LDSHARED``, then ``cc``) into
``$XDG_CACHE_HOME/thresher/native`` (``~/.cache/...``; ``THRESHER_NATIVE_DIR`` overrides
it), under a name that holds the hash of the source, and renames it into place when it
is complete (processes that build at once each rename a whole file). Each load marks the
module used (its modification time); a build removes the folder's modules of this Python
unused for ``STALE_DAYS`` days (those of earlier thresher versions), so upgrades do not
pile builds up. When neither exists, :func:`load` returns None with the reason, and
``highway`` hashes in Python.

Example:
    >>> module, reason = load()
    >>> module is None or module.hash64(b"", 1, 2, 3, 4) == module.hash64(b"", 1, 2, 3, 4)
    True
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.machinery
import importlib.util
import os
import shlex
import subprocess
import sys
import sysconfig
import time
from types import ModuleType

__all__ = ["STALE_DAYS", "cache_dir", "load"]

_SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_highway.c")
_BUILD_TIMEOUT_S = 120
STALE_DAYS = 30  # a built module not loaded for this long is removed at the next build


def cache_dir() -> str:
    """Where built modules are kept (``THRESHER_NATIVE_DIR``, else the user cache)."""
    explicit = os.environ.get("THRESHER_NATIVE_DIR")
    if explicit:
        return explicit
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "thresher", "native")


def _import_file(path: str) -> ModuleType:
    loader = importlib.machinery.ExtensionFileLoader("_highway", path)
    spec = importlib.util.spec_from_file_location("_highway", path, loader=loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def _compilers() -> list[list[str]]:
    out = []
    ldshared = sysconfig.get_config_var("LDSHARED")
    if ldshared:
        out.append(shlex.split(ldshared))
    out.append(["cc", "-shared"])
    return out


def _build(target: str) -> str | None:
    """Compiles ``_highway.c`` to ``target``; None, or why it could not."""
    if sys.platform == "win32":
        return "no compiler is looked for on Windows (install a wheel built with one)"
    include = sysconfig.get_paths()["include"]
    if not os.path.exists(os.path.join(include, "Python.h")):
        return f"Python's C headers are not installed (no {include}/Python.h; e.g. apt install python3-dev)"
    os.makedirs(os.path.dirname(target), mode=0o755, exist_ok=True)
    tmp = f"{target}.{os.getpid()}.tmp"
    problems = []
    try:
        for command in _compilers():
            cmd = [*command, "-O3", "-fPIC", f"-I{include}", _SOURCE, "-o", tmp]
            try:
                done = subprocess.run(cmd, capture_output=True, timeout=_BUILD_TIMEOUT_S, check=False)
            except (OSError, subprocess.SubprocessError) as e:
                problems.append(f"{command[0]}: {e}")
                continue
            if done.returncode == 0 and os.path.exists(tmp):
                os.replace(tmp, target)
                return None
            problems.append(f"{command[0]}: {done.stderr.decode(errors='replace').strip()[-300:]}")
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return "; ".join(problems)


def _sweep(target: str, now: float) -> None:
    """Removes the modules beside ``target`` built for this Python and not used for STALE_DAYS."""
    folder, suffix = os.path.dirname(target), importlib.machinery.EXTENSION_SUFFIXES[0]
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        path = os.path.join(folder, name)
        if path == target or not (name.startswith("_highway_") and name.endswith(suffix)):
            continue
        try:
            if now - os.stat(path).st_mtime > STALE_DAYS * 86400:
                os.remove(path)
        except OSError:  # gone already, or not ours to remove: it stays
            pass


def _unsafe(target: str) -> str:
    """Why the built module must not be loaded ("" if it may): code is loaded only from a
    file and folder this user owns and not everyone can write."""
    if not hasattr(os, "getuid"):
        return ""
    for path in (target, os.path.dirname(target)):
        st = os.stat(path)
        if st.st_uid != os.getuid() or st.st_mode & 0o002:
            return (f"{path} is not this user's alone (owner {st.st_uid}, mode {st.st_mode & 0o777:o}): "
                    "the module there is not loaded; set THRESHER_NATIVE_DIR to a folder of your own")
    return ""


def load() -> tuple[ModuleType | None, str]:
    """The C module and where it came from, or ``(None, why not)``."""
    try:  # the module pip built, beside this file (loaded by name: it may not exist)
        return importlib.import_module(f"{__package__}._highway"), "built at install"
    except ImportError:
        pass
    try:
        with open(_SOURCE, "rb") as f:
            source = f.read()
    except OSError as e:
        return None, f"its source is missing ({e})"
    tag = hashlib.sha256(source + sys.version.encode() + sys.platform.encode()).hexdigest()[:16]
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    target = os.path.join(cache_dir(), f"_highway_{tag}{suffix}")
    why = ""
    if not os.path.exists(target):
        try:
            why = _build(target) or ""
        except OSError as e:
            why = f"cannot write to {os.path.dirname(target)} ({e}; set THRESHER_NATIVE_DIR)"
        if why:
            return None, f"it could not be built ({why})"
        _sweep(target, time.time())
    unsafe = _unsafe(target)
    if unsafe:
        return None, unsafe
    with contextlib.suppress(OSError):  # used now: a later build elsewhere does not take it for stale
        os.utime(target)
    try:
        return _import_file(target), f"built on first use in {os.path.dirname(target)}"
    except ImportError as e:
        return None, f"the built module {target} does not load ({e})"
