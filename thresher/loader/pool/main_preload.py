"""Imported by the fork server only: the training script's module, for every worker, run lazily.

Workers started by the fork server make the main module exist (as ``__mp_main__``) so
that what was pickled by reference to it can be found: multiprocessing runs the script's
top level again in each worker unless the fork server did it before forking (on Python
3.11-3.13 it never does: ``forkserver.ensure_running`` keeps a ``main_path`` key that
``spawn.get_preparation_data`` calls ``init_main_from_path``). Either way that costs the
script's imports (``import torch``, ``import jax``: seconds) before the first chunk.
thresher's workers need nothing from it: the pipeline is shipped with cloudpickle, which
sends what ``__main__`` defines by value.

:func:`thresher.loader.pool.worker_start.prestart` puts the main module's path (or its
name, for ``python -m``) in the environment of the fork server it starts, with this
module in the preload list. Importing this module in the server then installs a stand-in
for the main module, as multiprocessing would find it had the server imported it, whose
top level runs the first time a name it defines is looked up (unpickling something of
``__main__``'s by reference: a multiprocessing job of the user's own on the same fork
server), in that process only, as multiprocessing would have run it. A thresher worker
looks nothing up there, so it starts in milliseconds. Where the server already imported
the main module (a Python that passes the path), nothing happens.

Only a process whose parent set the variables (the fork server) acts on them: imported
anywhere else this module does nothing.
"""

from __future__ import annotations

import importlib.machinery
import os
import runpy
import sys
import types
from typing import Any

__all__ = ["ENV_NAME", "ENV_PATH"]

ENV_PATH = "THRESHER_FORKSERVER_MAIN_PATH"  # "<parent pid>:<path of the main script>"
ENV_NAME = "THRESHER_FORKSERVER_MAIN_NAME"  # "<parent pid>:<module name>" (python -m)


def _ours(var: str) -> str | None:
    value = os.environ.pop(var, None)
    if value is None:
        return None
    pid, _, what = value.partition(":")
    if pid != str(os.getppid()) and pid.isdigit() and (os.getppid() == 1 or not _alive(int(pid))):
        # The training process that started this server ended while it imported (a script that
        # constructed a loader and returned): nothing will ask for a worker. Exit now, before
        # a request it queued (the starter's probe) makes a process that would run the script.
        os._exit(0)
    return what if pid == str(os.getppid()) and what else None


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (an ended process its parent has not waited for yet does not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False
    except OSError:  # no /proc
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except OSError:
            return True  # someone else's process (EPERM): alive
        return True


class _LazyMain(types.ModuleType):
    """The main module, whose top level runs (once, as ``__mp_main__``) when a name it defines is looked up."""

    def __init__(self, path: str | None, name: str | None) -> None:
        super().__init__("__mp_main__")
        self.__file__ = path if path is not None else None
        if name is not None:
            self.__spec__ = importlib.machinery.ModuleSpec(name, None)
        self._thresher_main = (path, name)

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__") or attr == "_thresher_main":
            raise AttributeError(attr)  # probes of module attributes (__path__, __loader__) never run the script
        path, name = self.__dict__.pop("_thresher_main", (None, None))
        if path is None and name is None:
            raise AttributeError(f"module '__main__' has no attribute {attr!r}")
        from multiprocessing import process

        current = process.current_process()
        inheriting = current.__dict__.get("_inheriting")  # set already while a process object is unpickled
        current._inheriting = True  # type: ignore[attr-defined]  # as multiprocessing's own import of it
        try:
            ran = (runpy.run_module(name, run_name="__mp_main__", alter_sys=True) if name is not None
                   else runpy.run_path(path or "", run_name="__mp_main__"))
        finally:
            if inheriting is None:
                del current._inheriting  # type: ignore[attr-defined]
        self.__dict__.update(ran)
        if attr not in self.__dict__:
            raise AttributeError(f"module '__main__' has no attribute {attr!r}")
        return self.__dict__[attr]


def _preload() -> None:
    path, name = _ours(ENV_PATH), _ours(ENV_NAME)
    if path is None and name is None:
        return
    main = sys.modules.get("__main__")
    if name is not None and getattr(getattr(main, "__spec__", None), "name", None) == name:
        return  # the server imported it already
    if name is None and getattr(main, "__file__", None) == path:
        return
    stand_in = _LazyMain(path if name is None else None, name)
    sys.modules["__main__"] = sys.modules["__mp_main__"] = stand_in


_preload()
