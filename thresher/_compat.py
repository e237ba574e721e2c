"""Taking Grain's objects where thresher takes its own (without importing Grain).

thresher's constructors call these one-line coercions, so a Grain ``ShardOptions``
(or ``NoSharding``/``ShardByJaxProcess``), ``Batch`` (or ``BatchOperation``),
``ReadOptions`` and a Grain-style state (bytes or text of JSON) are accepted
wherever thresher's own would be. Objects are recognised by their attributes, never
by importing Grain: the core stays numpy + array_record + cloudpickle.

Example:
    >>> from dataclasses import dataclass
    >>> from thresher._compat import as_shard_options, as_state
    >>> @dataclass(frozen=True)
    ... class ShardOptions:            # what Grain's looks like
    ...     shard_index: int
    ...     shard_count: int
    ...     drop_remainder: bool = False
    >>> as_shard_options(ShardOptions(1, 4), "shard_options")
    ShardOptions(shard_index=1, shard_count=4, drop_remainder=False, block_size=None)
    >>> as_state(b'{"position": 3}', "set_state")
    {'position': 3}
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from thresher._validate import is_int
from thresher.errors import ConfigError, ConfigTypeError, InvalidStateError

if TYPE_CHECKING:  # imported where used: samplers and transforms import this module
    from thresher.samplers.sharding import ShardOptions
    from thresher.transforms.batch import Batch

__all__ = ["as_batch", "as_shard_options", "as_state", "check_read_options", "transform_function"]


def _grain_name(obj: Any) -> str:
    cls = type(obj)
    return f"{cls.__module__}.{cls.__qualname__}"


def as_shard_options(obj: Any, where: str) -> ShardOptions:
    """thresher's ShardOptions for thresher's own or anything shaped like Grain's."""
    from thresher.samplers.sharding import ShardOptions

    if isinstance(obj, ShardOptions):
        return obj
    index, count = getattr(obj, "shard_index", None), getattr(obj, "shard_count", None)
    if isinstance(index, int) and isinstance(count, int) and hasattr(obj, "drop_remainder"):
        return ShardOptions(index, count, bool(obj.drop_remainder), getattr(obj, "block_size", None))
    raise ConfigTypeError(
        f"{where} got {obj!r} ({_grain_name(obj)}), which has no shard_index/shard_count/drop_remainder: "
        "pass thresher.ShardOptions(shard_index, shard_count), thresher.NoSharding() or Grain's ShardOptions"
    )


def as_batch(obj: Any, index: int) -> Batch | None:
    """thresher's Batch for Grain's ``Batch``/``BatchOperation``; None for anything else."""
    from thresher.transforms.batch import Batch

    if isinstance(obj, Batch):
        return obj
    if type(obj).__name__ not in ("Batch", "BatchOperation") or not hasattr(obj, "batch_size"):
        return None
    if getattr(obj, "batch_fn", None) is not None:
        raise ConfigError(
            f"operation {index} {obj!r} has a batch_fn, which thresher does not run: thresher's Batch stacks "
            "leaf by leaf; pass Batch(batch_size) and put your function in a map after it"
        )
    return Batch(obj.batch_size, bool(getattr(obj, "drop_remainder", False)))


_KINDS = ("map", "random_map", "filter", "map_with_index")


def transform_function(obj: Any, kind: str, where: str) -> Callable[..., Any]:
    """The function a Dataset step of ``kind`` ("map", "random_map", "filter") runs.

    A callable is used as it is (as the DataLoader does); a transform object
    (thresher's or Grain's) gives its bound ``map``/``random_map``/``filter`` method.
    A transform of another kind is refused with the step to use instead.

    Example:
        >>> from thresher.transforms import MapTransform
        >>> from thresher._compat import transform_function
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


def check_read_options(obj: Any, where: str) -> Any:
    """Checks a Grain-style ReadOptions (num_threads, prefetch_buffer_size) and returns it.

    thresher reads each chunk's records in one batched call in the process that
    computes the chunk, so these change nothing; a malformed one is still refused.
    """
    if obj is None:
        return None
    values = [getattr(obj, name, None) for name in ("num_threads", "prefetch_buffer_size")]
    if not all(is_int(v, minimum=0) for v in values):
        raise ConfigError(f"{where} got {obj!r}: pass ReadOptions(num_threads=..., prefetch_buffer_size=...) "
                          "with ints >= 0, or None")
    return obj


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


def check_sampler(sampler: Any, sampler_class: type) -> Any:
    """Returns ``sampler`` if it is a thresher IndexSampler; otherwise says what to pass."""
    if isinstance(sampler, sampler_class):
        return sampler
    grain_hint = ""
    if type(sampler).__name__ in ("IndexSampler", "SequentialSampler"):
        grain_hint = (f" ({_grain_name(sampler)} is another library's sampler: use "
                      f"thresher.grain.{type(sampler).__name__} with the same arguments, or thresher.IndexSampler)")
    raise ConfigTypeError(f"sampler must be a thresher.IndexSampler, got {sampler!r}{grain_hint}")
