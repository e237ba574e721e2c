"""``thresher explain``: the provenance of a step of a pipeline given as ``module:function``.

Example:
    >>> import json, sys, tempfile, os
    >>> d = tempfile.mkdtemp()
    >>> with open(os.path.join(d, "my_pipe.py"), "w") as f:
    ...     _ = f.write("import thresher as th\\n"
    ...                 "def loader():\\n"
    ...                 "    src = th.sources.RangeDataSource(0, 8)\\n"
    ...                 "    return th.DataLoader(src, th.IndexSampler(8), [th.Batch(2)])\\n")
    >>> sys.path.insert(0, d)
    >>> run_explain("my_pipe:loader", 1, None, None, False)   # doctest: +NORMALIZE_WHITESPACE
    step 1: 2 elements
    process  position  global_position  epoch  record_key  rng_seed            file:index
          0         2                2      0           2  0x...  -
          0         3                3      0           3  0x...  -
    0
    >>> sys.path.remove(d)
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from typing import Any

from thresher.errors import ConfigError
from thresher.forensics.explain import explain

__all__ = ["load_pipeline", "run_explain"]


def load_pipeline(spec: str) -> Any:
    """Imports ``module:function`` and calls the function (no arguments): the DataLoader or Dataset.

    Example:
        >>> load_pipeline("thresher")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        thresher.errors.ConfigError: --pipeline must be MODULE:FUNCTION (e.g. ...), got 'thresher'
    """
    module_name, sep, name = spec.partition(":")
    if not sep or not module_name or not name:
        raise ConfigError(f"--pipeline must be MODULE:FUNCTION (e.g. my_project.data:train_loader), got {spec!r}")
    _current_directory_first()
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        raise ConfigError(f"--pipeline {spec!r}: cannot import {module_name!r} ({e}); the current directory "
                          f"({os.getcwd()}) is searched first: run from the directory that holds it or put that "
                          "directory on PYTHONPATH") from e
    fn = getattr(module, name, None)
    if not callable(fn):
        raise ConfigError(f"--pipeline {spec!r}: {module_name} has no function {name!r}")
    return fn()


def _current_directory_first() -> None:
    # The ``thresher`` console script starts with its own bin directory first on sys.path, so a
    # ``my_pipeline.py`` beside the user would not import; ``python -m`` puts the current directory
    # first, and so does this (once: nothing is added when it is already there).
    cwd = os.getcwd()
    if not any(p in ("", cwd) for p in sys.path):
        sys.path.insert(0, cwd)


def run_explain(pipeline: str, step: int, state_path: str | None, process_index: int | None,
                as_json: bool, ledger: str | None = None) -> int:
    """Prints the provenance of ``step``; returns the exit status."""
    loader = load_pipeline(pipeline)
    state = None
    if state_path is not None:
        with open(state_path) as f:
            state = json.load(f)
    result = explain(loader, step, process_index, state=state, ledger=ledger)
    print(json.dumps(result.to_json()) if as_json else result)
    return 0
