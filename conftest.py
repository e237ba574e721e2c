"""Doctest collection (testpaths include thresher/): skip modules whose optional extras are missing."""

import importlib.util

collect_ignore_glob: list[str] = []
if importlib.util.find_spec("jax") is None:
    collect_ignore_glob += ["thresher/jax/*", "thresher/demo_jax.py"]
elif importlib.util.find_spec("orbax") is None:
    collect_ignore_glob += ["thresher/jax/checkpoint.py"]
