"""Doctest collection (testpaths include thresher/): skip modules whose optional extras are missing;
the leak guard for every test."""

import importlib.util

collect_ignore_glob: list[str] = []
if importlib.util.find_spec("jax") is None:
    collect_ignore_glob += ["thresher/jax/*", "thresher/demo/jax_demo.py"]
elif importlib.util.find_spec("orbax") is None:
    collect_ignore_glob += ["thresher/jax/checkpoint.py"]

# Every test, doctests included, must leave no process and no shared memory behind (tests/leak_guard.py).
pytest_plugins = ["tests.leak_guard"]
