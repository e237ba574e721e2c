"""The loader tests' fixtures (the long-lived multiprocessing helpers, started once)."""

from tests.loader.conftest import _helpers_started  # noqa: F401
