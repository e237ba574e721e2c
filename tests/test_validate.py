"""The shared checks of thresher/_validate.py."""

from __future__ import annotations

import numpy as np
import pytest

from thresher._validate import check_count, check_int, is_int, is_seconds, require_key
from thresher.errors import ConfigError, ConfigTypeError, InvalidStateError


def test_is_int_takes_numpy_ints_unless_told_not_to() -> None:
    assert is_int(np.int32(3), 0, 3) and not is_int(np.int32(3), numpy=False)
    assert is_int(3, numpy=False) and not is_int(True) and not is_int(3.0)


def test_a_value_that_is_no_int_raises_the_type_error_asked_for() -> None:
    with pytest.raises(ConfigTypeError, match="size must be an int >= 1, got '2'"):
        check_count("2", "size", minimum=1, type_error=ConfigTypeError)
    with pytest.raises(ConfigError, match="size must be an int >= 1, got 0") as e:
        check_count(0, "size", minimum=1, type_error=ConfigTypeError)
    assert type(e.value) is ConfigError
    assert check_int(np.int64(4), "size", minimum=1, type_error=ConfigTypeError) == 4


def test_seconds_and_state_fields() -> None:
    assert [is_seconds(v) for v in (1, 0.5, 0, -1, True, "1", float("nan"))] == [True, True] + [False] * 5
    assert is_seconds(float("inf")) and not is_seconds(float("inf"), finite=True)
    assert require_key({"n": 3}, "n", (int,), "state") == 3
    with pytest.raises(InvalidStateError, match=r"state\['n'\] must be int, got True"):
        require_key({"n": True}, "n", (int,), "state", error=InvalidStateError)
