"""What every fuzz test asserts: the call returns, or raises a thresher error; never another
exception type, and never a hang (a SIGALRM timer turns a hang into a failure)."""

from __future__ import annotations

import contextlib
import signal
from typing import Any, Callable, Iterator

from hypothesis import strategies as st

from thresher.errors import ThresherError


class Hang(BaseException):
    """Raised by the timer; a BaseException so that no ``except Exception`` swallows it."""


@contextlib.contextmanager
def no_hang(seconds: float) -> Iterator[None]:
    def fire(signum: int, frame: Any) -> None:
        raise Hang(f"no answer within {seconds} s")

    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def only_thresher_errors(call: Callable[[], Any], seconds: float = 20.0) -> BaseException | None:
    """Runs ``call``; returns the thresher error it raised (or None). Anything else fails the test."""
    with no_hang(seconds):
        try:
            call()
        except ThresherError as e:
            assert str(e), "an error without a message"
            return e
        except Hang:
            raise
        except BaseException as e:  # noqa: BLE001 - the point: any other type is a bug
            raise AssertionError(f"{type(e).__name__} escaped instead of a thresher error: {e!r}") from e
    return None


JSON_SCALARS = st.one_of(
    st.none(), st.booleans(),
    st.integers(), st.sampled_from([-1, 0, 2**31, 2**63, 2**64 + 1, -(2**63) - 1, 10**30, -10**30]),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12),
)
JSON = st.recursive(JSON_SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=10), inner, max_size=4)), max_leaves=12)


def json_paths(d: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path into a JSON value (dict keys, list indices), for edits at any depth."""
    out = [prefix] if prefix else []
    if isinstance(d, dict):
        for k, v in d.items():
            out += json_paths(v, prefix + (k,))
    elif isinstance(d, list):
        for i, v in enumerate(d):
            out += json_paths(v, prefix + (i,))
    return out
