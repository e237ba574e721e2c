"""Static optimisation of a Dataset chain, and ``explain()``.

Three rewrites, none of which changes a single output element:

1. *No-op stages removed*: ``repeat(1)``, a slice that keeps everything when it
   applies to the source itself, maps of :func:`identity`.
2. *Batchable maps vectorised*: maps marked ``batchable=True`` (the function gives
   the same result on a stacked batch as on each element, stacked) directly before
   an unpadded ``batch`` move after it as one ``map_batch``: one call per batch
   instead of one per element.
3. *Fusion*: consecutive maps become one map, consecutive ``map_batch`` one, and
   consecutive filters one filter: one call per element instead of several.

Every node keeps the step it was written at, so random maps keep their seeds, and
the state's fingerprint is that of the chain as written: a checkpoint from an
optimised pipeline restores in an unoptimised one and the reverse.

Example:
    >>> import thresher as th
    >>> ds = th.Dataset.range(8).map(lambda x: x + 1, batchable=True).map(abs).batch(4)
    >>> [n.describe() for n in ds.optimized_nodes()][1:]
    ['map(<lambda>)+map(abs)', 'batch(4, drop_remainder=False)']
"""

from __future__ import annotations

from collections.abc import Sequence

from thresher.dataset import nodes as N
from thresher.dataset.nodes.elements import identity

__all__ = ["explain_text", "identity", "optimize"]


def _remove_noops(nodes: list[N.Node], notes: list[str]) -> list[N.Node]:
    out: list[N.Node] = []
    for i, n in enumerate(nodes):
        note = n.noop(nodes, i)
        if note is not None:
            notes.append(note)
            continue
        out.append(n)
    return out


def _vectorise(nodes: list[N.Node], notes: list[str]) -> list[N.Node]:
    out = list(nodes)
    i = 0
    while i < len(out):
        node = out[i]
        if not (isinstance(node, N.BatchNode) and node.pad_to is None):
            i += 1
            continue
        if any(isinstance(n, (N.BatchNode, N.Pack)) for n in out[:i]):
            break  # maps after an earlier batch work on batches already
        j = i - 1
        moved: list[N.Map] = []
        while j > 0:
            prev = out[j]
            if not (isinstance(prev, N.Map) and prev.batchable):
                break
            moved.insert(0, prev)
            j -= 1
        if not moved:
            i += 1
            continue
        fns = tuple(f for m in moved for f in m.fns)
        ats = tuple(m.at for m in moved)
        mb = N.MapBatch(at=moved[0].at, fns=fns, vectorised_from=ats)
        notes.append(f"vectorised {' '.join(m.describe() for m in moved)} (steps {list(ats)}) into map_batch after "
                     f"batch at step {node.at}")
        out = [*out[:j + 1], node, mb, *out[i + 1:]]
        i = j + 3
    return out


def _fuse(nodes: list[N.Node], notes: list[str]) -> list[N.Node]:
    out: list[N.Node] = []
    for n in nodes:
        fused = n.fused_into(out[-1]) if out else None
        if fused is not None:
            out[-1], note = fused
            notes.append(note)
        else:
            out.append(n)
    return out


def optimize(nodes: Sequence[N.Node]) -> tuple[tuple[N.Node, ...], list[str]]:
    """The optimised chain, and one note per rewrite."""
    notes: list[str] = []
    out = _remove_noops(list(nodes), notes)
    out = _vectorise(out, notes)
    out = _fuse(out, notes)
    return tuple(out), notes


def explain_text(written: Sequence[N.Node], optimised: Sequence[N.Node], notes: Sequence[str],
                 stages: Sequence[str], enabled: bool) -> str:
    lines = ["as written:"]
    lines += [f"  [{n.at}] {n.describe()}" for n in written]
    if enabled:
        lines.append("optimised:" if notes else "optimised: (nothing to change)")
        lines += [f"  [{n.at}] {n.describe()}" for n in optimised]
        lines += [f"  - {note}" for note in notes]
    else:
        lines.append("optimised: (optimisation is off)")
    lines.append("engine:")
    lines += [f"  {s}" for s in stages]
    return "\n".join(lines)
