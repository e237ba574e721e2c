"""Imported by the fork server only: the training script's module, once, for every worker.

Workers started by the fork server import the main module again (as ``__mp_main__``) so
that the functions it defines exist there. multiprocessing means the fork server to do
that once, before it forks (``"__main__"`` in the preload list), but on Python 3.11-3.13
the server never receives the script's path (``forkserver.ensure_running`` keeps a
``main_path`` key that ``spawn.get_preparation_data`` calls ``init_main_from_path``), so
every worker ran the script's top level itself: ``import torch`` and ``import jax`` there
cost each worker of a real script seconds before its first chunk.

:func:`thresher.loader.pool.worker_start.prestart` puts the main module's path (or its
name, for ``python -m``) in the environment of the fork server it starts, with this
module first in the preload list; importing this module in the server then imports the
main module as multiprocessing would have (as ``__mp_main__``, with process starts
refused while it runs), and the workers forked from the server find it there and skip it.
Where the server already did it (a Python that passes the path), nothing happens. An
error in the script's top level is left for the workers to meet (and report) as before.

Only a process whose parent set the variables (the fork server) acts on them: imported
anywhere else this module does nothing.
"""

from __future__ import annotations

import contextlib
import os

__all__ = ["ENV_NAME", "ENV_PATH"]

ENV_PATH = "THRESHER_FORKSERVER_MAIN_PATH"  # "<parent pid>:<path of the main script>"
ENV_NAME = "THRESHER_FORKSERVER_MAIN_NAME"  # "<parent pid>:<module name>" (python -m)


def _ours(var: str) -> str | None:
    value = os.environ.pop(var, None)
    if value is None:
        return None
    pid, _, what = value.partition(":")
    return what if pid == str(os.getppid()) and what else None


def _preload() -> None:
    path, name = _ours(ENV_PATH), _ours(ENV_NAME)
    if path is None and name is None:
        return
    from multiprocessing import process, spawn

    current = process.current_process()
    current._inheriting = True  # type: ignore[attr-defined]  # as multiprocessing's own preload does
    try:
        with contextlib.suppress(Exception):  # the workers meet the error themselves, as without the preload
            fixup = getattr(spawn, "_fixup_main_from_name", None)
            if name is not None and fixup is not None:
                fixup(name)
            elif path is not None:
                spawn.import_main_path(path)
    finally:
        del current._inheriting  # type: ignore[attr-defined]


_preload()
