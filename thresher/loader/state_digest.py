"""The digest a state carries of its own fields: an edited state is refused, never applied.

``LoaderState.to_json`` (thresher.loader.state_types) adds ``"digest"``: a keyed BLAKE2b
(128 bits) of the canonical JSON (sorted keys, no spaces, ASCII) of every other field of
the state, the fingerprint included. ``from_json`` recomputes it from the fields it was
given and refuses the state (InvalidStateError) when they differ: a state changed after it
was saved, by hand, by a script or by corruption, is never applied, whatever field changed
and however several fields were changed together. Everything that makes states
(``get_state``, ``merge_states``, ``slowest_state``, the Orbax handler) makes them through
``to_json``, so they carry a valid digest.

This is integrity, not security: the key is a constant of this module, so anyone who
reads this code can compute a digest for an edited state. It catches accidental and naive
edits (and ``json`` round trips that change a value), which is what ``set_state``
promises; it does not authenticate a state from an untrusted party.

Example:
    >>> from thresher.loader.state_digest import check_digest, state_digest
    >>> state = {"version": 2, "position": 8}
    >>> state["digest"] = state_digest(state)
    >>> check_digest(state)
    >>> check_digest(dict(state, position=9))
    Traceback (most recent call last):
    ...
    thresher.errors.InvalidStateError: the state was changed after it was saved: ...
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from thresher.errors import InvalidStateError

__all__ = ["DIGEST", "check_digest", "state_digest"]

DIGEST = "digest"
"""The key of the digest in a saved state."""
_KEY = b"thresher.state"  # a constant, not a secret: see the module docstring


def state_digest(state: Mapping[str, Any]) -> str:
    """The digest of a state's fields (all but ``"digest"``): keyed BLAKE2b of their canonical JSON.

    Example:
        >>> a = state_digest({"position": 4, "version": 2})
        >>> a == state_digest({"version": 2, "position": 4, "digest": "x"}), a == state_digest({"position": 5})
        (True, False)
    """
    fields = {k: v for k, v in state.items() if k != DIGEST}
    try:
        text = json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise InvalidStateError(f"the state is not plain JSON (as get_state() returns it): {e}") from e
    return hashlib.blake2b(text.encode(), digest_size=16, key=_KEY).hexdigest()


def check_digest(state: Mapping[str, Any]) -> None:
    """Raises InvalidStateError unless ``state``'s fields are those its digest was made of."""
    saved = state.get(DIGEST)
    if saved is None:
        raise InvalidStateError(
            "the state has no 'digest': it was changed after it was saved (the digest was removed). "
            "Restore a state exactly as get_state() returned it")
    if not isinstance(saved, str) or saved != state_digest(state):
        raise InvalidStateError(
            "the state was changed after it was saved: its fields do not match its digest. set_state "
            "applies only a state exactly as get_state() (or merge_states, slowest_state) returned it; "
            "restore the saved state itself (saving it as JSON is fine), not an edited copy")
