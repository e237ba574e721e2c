"""Normalising a list of operations into a plan: record ops, one Batch, batch ops."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from thresher._compat import as_batch
from thresher.errors import ConfigError
from thresher.transforms.batch import Batch
from thresher.transforms.filter import FilterTransform
from thresher.transforms.map import MapTransform
from thresher.transforms.random_map import RandomMapTransform, operation_salt

__all__ = ["Operation", "Plan", "describe", "plan_operations", "MAP", "RANDOM_MAP", "FILTER", "MAP_WITH_INDEX"]

MAP, RANDOM_MAP, FILTER, MAP_WITH_INDEX = "map", "random_map", "filter", "map_with_index"


def _fn_name(fn: Any) -> str:
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
    if name is None:
        name = type(fn).__qualname__
    return str(name)


def describe(op: Any) -> str:
    """A short, stable description of an operation: ``Map(decode)``, ``Filter(keep)``."""
    if isinstance(op, Batch):
        return repr(op)
    for cls, kind in ((RandomMapTransform, "RandomMap"), (FilterTransform, "Filter"), (MapTransform, "Map")):
        if isinstance(op, cls):
            fn = getattr(op, "_fn", None)
            seed = getattr(op, "seed", None) if cls is RandomMapTransform else None
            extra = "" if seed is None else f", seed={seed}"
            if type(op) is cls and fn is not None:
                return f"{kind}({_fn_name(fn)}{extra})"
            return f"{kind}({type(op).__qualname__}{extra})"
    if callable(getattr(op, "map_with_index", None)):
        fn = getattr(op, "_fn", None)
        return f"MapWithIndex({_fn_name(fn) if fn is not None else type(op).__qualname__})"
    return f"Map({_fn_name(op)})"


@dataclass(frozen=True)
class Operation:
    """One per-element step: its kind, the callable to run, its name and index.

    ``salt`` keys a RandomMap's randomness (from its index, or its own seed).
    """

    kind: str
    fn: Callable[..., Any]
    name: str
    index: int
    salt: int = 0


def _direct(op: Any, cls: type, method: Callable[..., Any]) -> Callable[..., Any]:
    """The wrapped function itself when ``op`` is a plain wrapper (one call less per record)."""
    fn = getattr(op, "_fn", None)
    return fn if type(op) is cls and fn is not None and cls is not FilterTransform else method


def _operation(op: Any, index: int) -> Operation:
    name = describe(op)
    if isinstance(op, RandomMapTransform):
        return Operation(RANDOM_MAP, _direct(op, RandomMapTransform, op.random_map), name, index,
                         operation_salt(index, getattr(op, "seed", None)))
    if isinstance(op, FilterTransform):
        return Operation(FILTER, op.filter, name, index)
    if isinstance(op, MapTransform):
        return Operation(MAP, _direct(op, MapTransform, op.map), name, index)
    # Duck-typed transforms (e.g. Grain's objects), taken as they are.
    if callable(getattr(op, "map_with_index", None)):  # the engine passes the global position
        return Operation(MAP_WITH_INDEX, op.map_with_index, name, index)
    if callable(getattr(op, "random_map", None)):
        return Operation(RANDOM_MAP, op.random_map, f"RandomMap({type(op).__qualname__})", index,
                         operation_salt(index))
    if callable(getattr(op, "filter", None)) and not callable(op):
        return Operation(FILTER, op.filter, f"Filter({type(op).__qualname__})", index)
    if callable(getattr(op, "map", None)) and not callable(op):
        return Operation(MAP, op.map, f"Map({type(op).__qualname__})", index)
    if callable(op):
        return Operation(MAP, op, name, index)
    raise ConfigError(
        f"operation {index} ({op!r}) is not a transform or a callable: pass a function, "
        "MapTransform, RandomMapTransform, FilterTransform, MapWithIndexTransform or Batch"
    )


@dataclass(frozen=True)
class Plan:
    """The operations of a pipeline, split at the (first) Batch.

    ``record_ops`` run on each record, ``batch`` groups them, ``batch_ops`` run on
    each batch. Without a Batch, ``batch`` is None and ``batch_ops`` is empty.
    """

    record_ops: tuple[Operation, ...] = ()
    batch: Batch | None = None
    batch_ops: tuple[Operation, ...] = ()
    descriptions: tuple[str, ...] = field(default=())

    @property
    def filter_before_batch(self) -> bool:
        return any(op.kind == FILTER for op in self.record_ops)

    @property
    def needs_record_seeds(self) -> bool:
        return any(op.kind == RANDOM_MAP for op in self.record_ops)

    def record_ops_digest(self) -> str:
        """A digest of the per-record operations (part of the stream's fingerprint)."""
        text = "|".join(op.name for op in self.record_ops)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def plan_operations(operations: Sequence[Any]) -> Plan:
    """Splits ``operations`` at the Batch and checks every entry.

    Example:
        >>> from thresher.transforms import Batch, plan_operations
        >>> plan = plan_operations([abs, Batch(4)])
        >>> [op.name for op in plan.record_ops], plan.batch.batch_size
        (['Map(abs)'], 4)
    """
    if isinstance(operations, (Batch, MapTransform, RandomMapTransform, FilterTransform)) or callable(operations):
        raise ConfigError("operations must be a list of operations, e.g. [decode, Batch(32)]")
    record: list[Operation] = []
    after: list[Operation] = []
    batch: Batch | None = None
    operations = [as_batch(op, i) or op for i, op in enumerate(operations)]  # Grain's Batch too
    for i, op in enumerate(operations):
        if isinstance(op, Batch):
            if batch is not None:
                raise ConfigError(
                    f"operation {i} is a second Batch; batching batches is not supported: use one "
                    f"Batch({batch.batch_size} * {op.batch_size}) and reshape in a map after it"
                )
            batch = op
            continue
        if batch is not None and callable(getattr(op, "map_with_index", None)):
            raise ConfigError(f"operation {i} {describe(op)} comes after the Batch: put it before the Batch "
                              "(its index is a record's position) or use a map on whole batches")
        (after if batch is not None else record).append(_operation(op, i))
    return Plan(tuple(record), batch, tuple(after), tuple(describe(op) for op in operations))
