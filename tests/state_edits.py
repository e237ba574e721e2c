"""A test helper: a state edited on purpose, given a valid digest again (``resign``).

``set_state`` refuses every edited state by its digest before anything else looks at it
(thresher.loader.state_digest). The checks behind the digest still guard the states that
carry a valid digest without a run having saved them: a version-1 state passed through
``thresher.upgrade_state``, a state re-signed by hand. Tests of those checks (a position
past the end or inside a batch, a mixture's origin past the position, geometry
conversions from hand-made positions) edit a state and re-sign it here, which is what
``upgrade_state`` does for a version-1 state; tests of the digest itself never re-sign.

Example:
    >>> import thresher as th
    >>> it = iter(th.DataLoader(th.sources.RangeDataSource(0, 8), th.IndexSampler(8), [th.Batch(2)]))
    >>> it.set_state(resign(dict(it.get_state(), position=4)))
    >>> next(it).tolist()
    [4, 5]
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from thresher.loader.state_digest import DIGEST, state_digest


def resign(state: Mapping[str, Any]) -> dict[str, Any]:
    """``state`` (edited) with the digest of its fields as they are now."""
    fields = {k: v for k, v in state.items() if k != DIGEST}
    fields[DIGEST] = state_digest(fields)
    return fields


def edited(state: Mapping[str, Any], **changes: Any) -> dict[str, Any]:
    """``state`` with top-level ``changes``, re-signed."""
    return resign({**state, **changes})
