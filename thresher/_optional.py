"""One home for optional imports: each names the ``pip install "thresher[extra]"`` that provides it.

``import thresher`` needs only numpy, array_record and cloudpickle. Everything else is imported
where it is used, through :func:`require`, so a missing package is a
:class:`~thresher.errors.MissingExtraError` (a ``ModuleNotFoundError``) that says what needs it and
the command to run, never a bare ``ModuleNotFoundError``. :func:`available` asks without raising,
for code that falls back to another library. :func:`lazy_names` gives a package's public names
that are imported on first use, so that importing one module of thresher (a worker's) does not
import them all.

Example:
    >>> from thresher._optional import require
    >>> require("numpy", "plain arrays").__name__
    'numpy'
    >>> require("no_such_module_xyz", "the example", extra="plot")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    thresher.errors.MissingExtraError: the example needs no_such_module_xyz: pip install "thresher[plot]" ...
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

from thresher.errors import MissingExtraError

__all__ = ["EXTRAS", "available", "install_command", "lazy_names", "missing", "require"]

# the top-level module -> the extra of pyproject.toml that installs it
EXTRAS = {
    "jax": "jax",
    "jaxlib": "jax",
    "orbax": "orbax",
    "torch": "torch",
    "PIL": "images",
    "cv2": "opencv",
    "matplotlib": "plot",
    "pandas": "pandas",
    "apache_beam": "beam",
    "fsspec": "remote",
    "s3fs": "remote",
    "gcsfs": "remote",
    "botocore": "remote",
    "cramjam": "remote",
    "zstandard": "remote",
    "sklearn": "demo",
    "tqdm": "demo",
}
# what the error calls the package (its pip name) when it is not the module's name
_PACKAGES = {"PIL": "Pillow", "cv2": "OpenCV (opencv-python-headless)", "sklearn": "scikit-learn",
             "apache_beam": "Apache Beam", "orbax": "orbax-checkpoint"}


def install_command(extra: str) -> str:
    """The command that installs an extra: ``pip install "thresher[extra]"``."""
    return f'pip install "thresher[{extra}]"'


def require(module: str, purpose: str, *, extra: str | None = None) -> ModuleType:
    """Imports ``module``; if it (or a module it needs) is missing, raises MissingExtraError.

    ``purpose`` says what needs it ("as_dataframe", "reading 's3://b/x'"); ``extra`` defaults to
    the extra that installs ``module``'s top-level package.
    """
    loaded = sys.modules.get(module)  # the common case, called per batch: no import machinery
    if loaded is not None and not getattr(getattr(loaded, "__spec__", None), "_initializing", False):
        return loaded  # (a module another thread is still importing goes through the import lock)
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        raise missing(e, purpose, module=module, extra=extra) from e


def missing(error: ModuleNotFoundError, purpose: str, *, module: str | None = None,
            extra: str | None = None) -> MissingExtraError:
    """The MissingExtraError for ``error``, for a module-level import (typed, unlike :func:`require`).

    Example:
        >>> try:
        ...     import no_such_module_xyz
        ... except ModuleNotFoundError as e:
        ...     print(missing(e, "the example", extra="beam"))  # doctest: +ELLIPSIS
        the example needs no_such_module_xyz: pip install "thresher[beam]" ...
    """
    top = (module or error.name or "").partition(".")[0]
    extra = extra or EXTRAS.get(top) or EXTRAS.get((error.name or "").partition(".")[0])
    how = install_command(extra) if extra else f"pip install {top}"
    package = _PACKAGES.get(top, top)
    needs = "" if error.name in (None, top, module) else f" (which needs {error.name})"
    return MissingExtraError(f"{purpose} needs {package}{needs}: {how} (or install {package} yourself)",
                             name=error.name or top)


def available(module: str) -> bool:
    """Whether ``module`` imports here (for code that falls back to another library)."""
    try:
        importlib.import_module(module)
    except ImportError:
        return False
    return True


def lazy_names(package: str, homes: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A package's ``__getattr__`` and ``__dir__`` (PEP 562) for names imported on first use.

    ``homes`` maps each public name to the module that defines it; a name whose home is
    ``f"{package}.{name}"`` is that submodule itself. The first lookup imports the home and
    keeps the value in the package, so later lookups cost nothing. The package imports the
    same names under ``TYPE_CHECKING`` for type checkers.

    Example:
        >>> getattr_, dir_ = lazy_names("thresher", {"errors": "thresher.errors"})
        >>> getattr_("errors").__name__, "errors" in dir_()
        ('thresher.errors', True)
    """
    namespace = importlib.import_module(package).__dict__

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = importlib.import_module(home)
        value = module if home == f"{package}.{name}" else getattr(module, name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *homes})

    return __getattr__, __dir__
