"""Normalising a list of operations into a plan: record ops, one Batch, batch ops.

What the user wrote (functions, transforms, Grain-style objects) becomes one of the
operation kinds of ``thresher.transforms.kinds``; how each kind runs lives there.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from thresher.errors import ConfigError, ConfigTypeError
from thresher.transforms.batch import Batch
from thresher.transforms.filter import FilterTransform
from thresher.transforms.kinds import FilterOp, MapOp, MapWithIndexOp, Operation, RandomMapOp, fn_name
from thresher.transforms.map import MapTransform
from thresher.transforms.random_map import RandomMapTransform, operation_salt

__all__ = ["Operation", "Plan", "describe", "plan_operations", "transform_function"]

_TRANSFORMS = (RandomMapTransform, FilterTransform, MapTransform)


def describe(op: Any) -> str:
    """A short, stable description of an operation: ``Map(decode)``, ``Filter(keep)``.

    Example:
        >>> from thresher.transforms import FilterTransform, describe
        >>> describe(abs), describe(FilterTransform(callable))
        ('Map(abs)', 'Filter(callable)')
    """
    if isinstance(op, (Batch, *_TRANSFORMS)):
        return op.describe()
    if callable(getattr(op, "map_with_index", None)):
        fn = getattr(op, "_fn", None)
        return f"MapWithIndex({fn_name(fn) if fn is not None else type(op).__qualname__})"
    return f"Map({fn_name(op)})"


def _operation(op: Any, index: int) -> Operation:
    if isinstance(op, _TRANSFORMS):
        return op.to_operation(index)
    # Duck-typed transforms (e.g. Grain's), so pipelines move over with a change of imports.
    if callable(getattr(op, "map_with_index", None)):  # the engine passes the global position
        return MapWithIndexOp(op.map_with_index, describe(op), index)
    if callable(getattr(op, "random_map", None)):
        name = f"RandomMap({type(op).__qualname__})"
        return RandomMapOp(op.random_map, name, index, operation_salt(index))
    if callable(getattr(op, "filter", None)) and not callable(op):
        return FilterOp(op.filter, f"Filter({type(op).__qualname__})", index)
    if callable(getattr(op, "map", None)) and not callable(op):
        return MapOp(op.map, f"Map({type(op).__qualname__})", index)
    if callable(op):
        return MapOp(op, describe(op), index)
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
    drops_records: bool = False  # errors="skip": a failing record is dropped, as by a Filter

    @property
    def filter_before_batch(self) -> bool:
        """A Filter before the Batch (or ``drops_records``): batches hold a data-dependent number of positions."""
        return self.drops_records or any(op.filters for op in self.record_ops)

    @property
    def filters_batches(self) -> bool:
        """A Filter after the Batch: whole batches may be dropped."""
        return any(op.filters for op in self.batch_ops)

    @property
    def needs_record_seeds(self) -> bool:
        return any(op.random for op in self.record_ops)

    def record_ops_digest(self) -> str:
        """A digest of the per-record operations (part of the stream's fingerprint)."""
        text = "|".join(op.name for op in self.record_ops)
        import hashlib  # here, not at the top: a worker (and the fork server) never makes one

        return hashlib.sha256(text.encode()).hexdigest()[:16]


def plan_operations(operations: Sequence[Any]) -> Plan:
    """Splits ``operations`` at the Batch and checks every entry.

    Example:
        >>> from thresher.transforms import Batch, plan_operations
        >>> plan = plan_operations([abs, Batch(4)])
        >>> [op.name for op in plan.record_ops], plan.batch.batch_size
        (['Map(abs)'], 4)
    """
    if isinstance(operations, (Batch, *_TRANSFORMS)) or callable(operations):
        raise ConfigError("operations must be a list of operations, e.g. [decode, Batch(32)]")
    record: list[Operation] = []
    after: list[Operation] = []
    batch: Batch | None = None
    operations = [Batch.coerce(op, i) or op for i, op in enumerate(operations)]  # Grain's Batch too
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


_KINDS = ("map", "random_map", "filter", "map_with_index")


def transform_function(obj: Any, kind: str, where: str) -> Callable[..., Any]:
    """The function a Dataset step of ``kind`` ("map", "random_map", "filter") runs.

    A callable is used as it is (as the DataLoader does); a transform object
    (thresher's or Grain's) gives its bound ``map``/``random_map``/``filter`` method.
    A transform of another kind is refused with the step to use instead.

    Example:
        >>> from thresher.transforms import MapTransform
        >>> from thresher.transforms.operations import transform_function
        >>> transform_function(MapTransform(abs), "map", "Dataset.map")(-2)
        2
    """
    method = None if isinstance(obj, type) else getattr(obj, kind, None)
    if callable(method) and (kind == "random_map" or not callable(obj)):
        return method
    if callable(obj):
        return obj
    others = [m for m in _KINDS if callable(getattr(obj, m, None))]
    hint = f"it has {others[0]}(): use {others[0]}" if others else "pass a function"
    raise ConfigTypeError(f"{where} takes a function or a transform with {kind}(), got {obj!r}; {hint}")
