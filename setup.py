"""The optional C extension (HighwayHash for Riegeli chunk hashes); the rest is pyproject.toml.

A missing compiler never fails the install (``optional=True``): thresher then builds the
same file on first use where it can, else hashes in Python (see
thresher/sources/remote/native.py).
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("thresher.sources.remote._highway", ["thresher/sources/remote/_highway.c"],
                             extra_compile_args=["-O3"], optional=True)])
