"""What ``set_state`` accepts: a state dict, or the bytes or text of its JSON (what Grain's
``get_state`` returns), turned into the dict :meth:`LoaderState.from_json` parses.

Example:
    >>> from thresher.loader.state_input import as_state
    >>> as_state(b'{"position": 3}', "set_state")
    {'position': 3}
"""

from __future__ import annotations

import json
from typing import Any

from thresher.errors import InvalidStateError

__all__ = ["as_state"]


def as_state(state: Any, where: str) -> dict[str, Any]:
    """A state dict from a dict, or from bytes/text of JSON (what Grain's get_state returns)."""
    if isinstance(state, dict):
        return state
    if isinstance(state, (bytes, bytearray, memoryview)):
        try:
            state = bytes(state).decode("utf-8")
        except UnicodeDecodeError as e:
            raise InvalidStateError(f"{where} got {len(state)} bytes that are not UTF-8 JSON: {e}") from None
    if isinstance(state, str):
        try:
            out = json.loads(state)
        except json.JSONDecodeError as e:
            raise InvalidStateError(f"{where} got text that is not JSON ({e}): pass what get_state() "
                                    "returned (a dict, or bytes of JSON)") from None
        if isinstance(out, dict):
            if "last_seen_indices" in out and "position" not in out:
                raise InvalidStateError(
                    f"{where} got a state saved by Grain's own DataLoader (last_seen_indices={out['last_seen_indices']}"
                    "): thresher's order for a seed differs from Grain's, so it cannot continue that run; "
                    "start from the beginning, or restore a state saved by thresher")
            return out
        raise InvalidStateError(f"{where} got JSON {type(out).__name__}, not an object: pass what get_state() "
                                "returned")
    raise InvalidStateError(f"{where} takes what get_state() returned (a dict, or bytes of JSON), got "
                            f"{type(state).__name__}")
