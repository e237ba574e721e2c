"""What the main module means for worker processes, and what to tell the user about it.

Workers start with multiprocessing's ``forkserver`` (or ``spawn``) method, which makes
each worker import the training script again (as ``__mp_main__``) so that the functions
it defines exist there. Two things go wrong with that, and both used to surface as a
worker that "died" for no stated reason:

- the script has no ``if __name__ == "__main__":`` guard: its top level runs again in
  every worker, creates a loader and starts workers of its own, which multiprocessing
  refuses; the worker exits (status 1) before its first chunk;
- the script was read from standard input (``python - < train.py``, a heredoc): its
  ``__file__`` is ``"<stdin>"``, a file no worker can import, so no worker starts at all.

Example:
    >>> from thresher.loader.main_module import has_main_guard
    >>> has_main_guard("def f(): ...\\nif __name__ == '__main__':\\n    f()\\n")
    True
    >>> has_main_guard("import thresher\\nloader = ...\\nfor batch in loader: ...\\n")
    False
"""

from __future__ import annotations

import os
import re
import sys

__all__ = ["GUARD_HINT", "guard_error", "has_main_guard", "main_script", "missing_guard", "unimportable_main"]

_GUARD = re.compile(r"""__name__\s*==\s*(['"])__main__\1|(['"])__main__\2\s*==\s*__name__""")

_GUARD_FIX = ('put the training loop under `if __name__ == "__main__":` (worker processes import the '
              'script again, as any multiprocessing code does; the guard keeps them from running the loop '
              'themselves)')
GUARD_HINT = f"your script's top level probably ran again in the worker: {_GUARD_FIX}"


def has_main_guard(source: str) -> bool:
    """Whether Python source text compares ``__name__`` with ``"__main__"`` anywhere."""
    return _GUARD.search(source) is not None


def main_script() -> str | None:
    """The file the ``__main__`` module was run from, as workers will look for it (or None)."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if not isinstance(path, str):
        return None  # an interactive session, ``python -c``, a notebook: nothing is re-imported
    return os.path.abspath(path)  # absolute already for ``python script.py`` (Python >= 3.9)


def missing_guard() -> bool:
    """True when the main script is a readable file without an ``if __name__ == "__main__":``."""
    path = main_script()
    if path is None or not os.path.isfile(path):
        return False
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return not has_main_guard(f.read())
    except OSError:
        return False


def guard_error() -> str | None:
    """Why worker processes must not start for this script (no ``__main__`` guard), or None.

    Checked before any worker starts, so that the mistake is an error on the first
    iteration whatever the data size (a worker would otherwise meet it only once it
    starts, and only a stream long enough to reach the workers would show it).

    Example:
        >>> from thresher.loader.main_module import guard_error
        >>> guard_error() is None   # pytest's main module has the guard
        True
    """
    if not missing_guard():
        return None
    return (f"thresher did not start worker processes: {main_script()} has no `if __name__ == \"__main__\":` "
            "guard, so each worker would run its top level again (and this loop with it) before its first "
            f"chunk: {_GUARD_FIX}, or use worker_count=0. The iterator is closed")


def unimportable_main() -> str | None:
    """Why worker processes could not import the main module again, or None if they can.

    Example:
        >>> from thresher.loader.main_module import unimportable_main
        >>> unimportable_main() is None   # pytest's main module is a real file
        True
    """
    main = sys.modules.get("__main__")
    if getattr(getattr(main, "__spec__", None), "name", None):
        return None  # ``python -m module``: workers import it by name
    path = main_script()
    if path is None or os.path.isfile(path):
        return None
    shown = getattr(main, "__file__", path)
    origin = "standard input (python -)" if shown == "<stdin>" else f"{shown!r}, which is not a file"
    return (f"this program's main module was read from {origin}. Worker processes import the main "
            "module again, and cannot import it from there. Save the script to a file and run "
            "`python script.py` (keeping the training loop under `if __name__ == \"__main__\":`), "
            "or use worker_count=0")
