"""Checkers for user input (internal): integer options (bools are not ints, NumPy ints are)
and the paths a user gives (``~`` and environment variables expanded, as a shell would).

Example:
    >>> from thresher._validate import check_int
    >>> check_int(4, "chunk_size", minimum=1)
    4
    >>> check_int(None, "worker_buffer_size", minimum=1, optional=True) is None
    True
    >>> try:
    ...     check_int(True, "chunk_size", minimum=1)
    ... except ValueError as e:
    ...     print(e)
    chunk_size must be an int >= 1, got True
    >>> import os
    >>> user_path("~/data") == os.path.join(os.path.expanduser("~"), "data")
    True
    >>> user_path("s3://bucket/~x/$HOME")
    's3://bucket/~x/$HOME'
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any, TypeGuard

import numpy as np

from thresher.errors import ConfigError

__all__ = ["check_count", "check_int", "is_int", "is_seconds", "require_key", "user_path"]

_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")


def is_int(value: object, minimum: int | None = None, maximum: int | None = None, *,
           numpy: bool = True) -> TypeGuard[int | np.integer]:
    """True for an int (or NumPy int, never a bool) in ``[minimum, maximum]``; with ``numpy=False``
    plain ints only (the values of a saved state's JSON).

    Example:
        >>> is_int(3, minimum=0), is_int(True), is_int(2**63, maximum=2**62), is_int(np.int64(5))
        (True, False, False, True)
        >>> is_int(np.int64(5), numpy=False)
        False
    """
    if isinstance(value, bool) or not isinstance(value, (int, np.integer) if numpy else int):
        return False
    return (minimum is None or int(value) >= minimum) and (maximum is None or int(value) <= maximum)


def is_seconds(value: object, *, finite: bool = False) -> bool:
    """True for a number of seconds > 0 (an int or a float, never a bool); with ``finite``, not infinite.

    Example:
        >>> is_seconds(0.5), is_seconds(0), is_seconds(True), is_seconds(float("inf"), finite=True)
        (True, False, False, False)
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return value > 0 and (not finite or value < float("inf"))


def check_int(
    value: object,
    name: str,
    *,
    minimum: int | None = None,
    maximum: int | None = None,
    optional: bool = False,
    error: type[Exception] = ConfigError,
    also: str = "",
    type_error: type[Exception] | None = None,
) -> int | None:
    """``value`` as an int (None when ``optional`` and None); raises ``error`` naming ``name``.

    ``minimum`` and ``maximum`` bound the allowed values; ``also`` names other values the
    caller accepts (for the message). The message says what is allowed. ``type_error``, when
    given, is raised instead of ``error`` for a value that is no int at all (e.g. ConfigTypeError).

    Example:
        >>> from thresher.errors import ConfigTypeError
        >>> try:
        ...     check_int("4", "batch size", minimum=1, type_error=ConfigTypeError)
        ... except TypeError as e:
        ...     print(type(e).__name__, e)
        ConfigTypeError batch size must be an int >= 1, got '4'
    """
    if value is None and optional:
        return None
    if is_int(value, minimum, maximum):
        return int(value)
    if type_error is not None and not is_int(value):
        error = type_error
    if maximum is None:
        bound = "" if minimum is None else f" >= {minimum}"
    else:
        bound = f" <= {maximum}" if minimum is None else f" in [{minimum}, {maximum}]"
    allowed = f"an int{bound}" + (" or None" if optional else "") + (f" or {also}" if also else "")
    raise error(f"{name} must be {allowed}, got {value!r}")


def check_count(
    value: object,
    name: str,
    *,
    minimum: int = 0,
    error: type[Exception] = ConfigError,
    also: str = "",
    type_error: type[Exception] | None = None,
) -> int:
    """``check_int`` for a required value: never None.

    Example:
        >>> check_count(3, "size")
        3
    """
    out = check_int(value, name, minimum=minimum, error=error, also=also, type_error=type_error)
    assert out is not None
    return out


def require_key(
    mapping: Mapping[str, Any],
    key: str,
    types: tuple[type, ...],
    where: str,
    *,
    error: type[Exception] = ConfigError,
) -> Any:
    """``mapping[key]`` of a saved state, which must be present and of one of ``types`` (a bool is an
    int only when ``types`` names bool); raises ``error`` naming ``where`` and the key.

    Example:
        >>> require_key({"position": 3}, "position", (int,), "state")
        3
    """
    if key not in mapping:
        raise error(f"{where} has no {key!r} field; it is not a thresher iterator state (fields: {sorted(mapping)})")
    v = mapping[key]
    if (isinstance(v, bool) and bool not in types) or not isinstance(v, types):
        raise error(f"{where}[{key!r}] must be {'/'.join(t.__name__ for t in types)}, got {v!r}")
    return v


def user_path(path: str | os.PathLike[str]) -> str:
    """A path the user gave, as a shell would have read it: ``~`` / ``~user`` and ``$VAR`` /
    ``${VAR}`` expanded (unknown variables are left as written). URLs (``s3://``, ``gs://``,
    ``https://``, ``file://``) are returned unchanged: object keys may hold ``~`` and ``$``.
    """
    text = os.fspath(path)
    if _URL.match(text):
        return text
    return os.path.expandvars(os.path.expanduser(text))
