"""Every thresher error is also the builtin a Grain or TFDS user catches for the same case.

The mapping is pinned class by class; errors survive pickling and the trip from a
worker process to the main process with their types; and where Grain raises for
the same case (a seed of the wrong type, no paths, a crashed worker, len() of a
stream), the builtin matches Grain's.
"""

from __future__ import annotations

import os
import pickle
from typing import Any

import cloudpickle
import grain
import grain.python as gp
import pytest

import thresher as th
from thresher import errors
from thresher.loader.pool.remote_errors import describe_exception, rebuild_exception

# The builtins a caller may catch, and which of them each thresher error is.
BUILTINS = (ValueError, TypeError, OSError, FileNotFoundError, IndexError, RuntimeError, ImportError)
MAPPING: dict[str, set[type]] = {
    "ThresherError": set(),
    "ConfigError": {ValueError},
    "ConfigTypeError": {ValueError, TypeError},
    "SourceError": {OSError},
    "SourceNotFoundError": {OSError, FileNotFoundError},
    "CorruptSourceError": {OSError, ValueError},
    "RecordKeyError": {IndexError, ValueError},  # IndexError as Grain, ValueError as TFDS
    "TransformError": {RuntimeError},
    "BatchError": {ValueError},
    "StateError": {ValueError},
    "InvalidStateError": {ValueError},
    "IncompatibleStateError": {ValueError},
    "GeometryError": {ValueError},
    "SplitError": {ValueError},
    "FeatureError": {ValueError},
    "DatasetInfoError": {OSError, ValueError},
    "IncompleteDatasetError": {OSError},
    "WorkerError": {RuntimeError},
    "WorkerStuckError": {RuntimeError},
    "CacheError": {RuntimeError},
    "RandomAccessError": {TypeError},
    "ConversionRequiredError": {OSError},
    "MissingExtraError": {ImportError},  # a ModuleNotFoundError naming pip install "thresher[extra]"
    "ReadTimeoutError": {OSError},  # and TimeoutError, as the builtin for a time limit
    "WriteError": {OSError},  # with the system's errno (ENOSPC)
}


def test_the_whole_mapping_is_pinned() -> None:
    assert set(errors.__all__) == set(MAPPING), "a new error class needs its builtin pinned here"
    for name, builtins in MAPPING.items():
        cls = getattr(errors, name)
        assert issubclass(cls, errors.ThresherError)
        assert {b for b in BUILTINS if issubclass(cls, b)} == builtins, name


def _sample(name: str) -> BaseException:
    e = getattr(errors, name)(f"{name}: what went wrong, and what to do")
    e.record_key, e.position = 7, 11  # what the engine attaches to a TransformError
    return e


@pytest.mark.parametrize("name", sorted(MAPPING))
@pytest.mark.parametrize("dumps", [pickle.dumps, cloudpickle.dumps], ids=["pickle", "cloudpickle"])
def test_every_error_pickles_with_its_type_message_and_attributes(name: str, dumps: Any) -> None:
    e = _sample(name)
    back = pickle.loads(dumps(e))
    assert type(back) is type(e) and str(back) == str(e)
    assert (back.record_key, back.position) == (7, 11)  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", sorted(MAPPING))
def test_every_error_keeps_its_type_from_a_worker(name: str) -> None:
    try:
        try:
            raise KeyError("the user's own error")
        except KeyError as cause:
            raise _sample(name) from cause
    except errors.ThresherError as e:
        info = pickle.loads(pickle.dumps(describe_exception(e)))  # what crosses the pipe
    back = rebuild_exception(info, "worker 1 of 2 (pid 1)")
    assert type(back) is getattr(errors, name)
    assert {b for b in BUILTINS if isinstance(back, b)} == MAPPING[name]
    assert "worker 1 of 2" in str(back) and isinstance(back.__cause__, KeyError)
    assert (back.record_key, back.position) == (7, 11)  # type: ignore[attr-defined]


def fail_on_5(x: int) -> int:
    if x == 5:
        raise ValueError("cannot handle 5")
    return x


def crash_on_5(x: int) -> int:
    if x == 5:
        os._exit(3)
    return x


def test_an_operation_error_is_chained_where_grain_reraises_it() -> None:
    """The documented difference: Grain re-raises the user's exception, thresher wraps it
    in a TransformError (a RuntimeError) naming the position, with the exception as cause."""
    with pytest.raises(ValueError, match="cannot handle 5"):
        list(grain.MapDataset.range(20).map(fail_on_5))
    with pytest.raises(errors.TransformError, match="position 5") as info:
        list(th.Dataset.range(20).map(fail_on_5))
    assert isinstance(info.value.__cause__, ValueError)


@pytest.mark.parametrize("warm_start", [True, False])
def test_real_worker_failures_are_runtime_errors(warm_start: bool) -> None:
    with pytest.raises(RuntimeError) as info:
        list(th.Dataset.range(20).map(fail_on_5).prefetch(worker_count=2, warm_start=warm_start))
    assert isinstance(info.value, errors.TransformError) and isinstance(info.value.__cause__, ValueError)
    if warm_start:
        return  # opted in: the first chunk runs in this process while the workers start, a crash there is not isolated
    with pytest.raises(RuntimeError) as info:  # the default: isolated, Grain's "a worker that exits" case
        list(th.Dataset.range(20).map(crash_on_5).prefetch(worker_count=2))
    assert isinstance(info.value, errors.WorkerError) and "exit code 3" in str(info.value)


@pytest.mark.parametrize("seed", ["1", 1.5, None, True])
def test_a_seed_of_the_wrong_type_is_a_type_error_as_in_grain(seed: Any) -> None:
    if seed is not True:  # Grain takes a bool for an int; thresher refuses it as the wrong type
        with pytest.raises(TypeError):
            gp.IndexSampler(10, gp.NoSharding(), shuffle=True, seed=seed if seed is not None else "x")
    for make in (lambda: th.Dataset.range(3).shuffle(seed=seed),
                 lambda: th.IndexSampler(10, shuffle=True, seed=seed if seed is not None else "x"),
                 lambda: th.Dataset.range(3).random_map(lambda x, rng: x, seed=seed if seed is not None else "x")):
        with pytest.raises(TypeError) as info:
            make()
        assert isinstance(info.value, errors.ConfigError)  # still a thresher error (and a ValueError)
        assert "seed" in str(info.value)
    with pytest.raises(ValueError, match="2\\*\\*64"):  # the right type, out of range
        th.Dataset.range(3).shuffle(seed=-1)


def test_no_paths_is_a_value_error_as_in_grain() -> None:
    with pytest.raises(ValueError):
        gp.ArrayRecordDataSource([])
    with pytest.raises(ValueError, match="no paths") as info:
        th.sources.ArrayRecordSource([])
    assert isinstance(info.value, errors.ConfigError)


def test_missing_file_is_a_file_not_found_error(tmp_path: Any) -> None:
    # Grain's ArrayRecordDataSource raises a RuntimeError from C++ here; thresher raises
    # what Python (and TFDS) raise for a missing file.
    with pytest.raises(FileNotFoundError) as info:
        th.sources.ArrayRecordSource(str(tmp_path / "missing.array_record"))
    assert isinstance(info.value, errors.SourceNotFoundError) and "missing.array_record" in str(info.value)


def test_len_of_a_stream_is_a_type_error_as_in_grain() -> None:
    with pytest.raises(TypeError):
        len(grain.MapDataset.range(5).to_iter_dataset())
    with pytest.raises(TypeError) as info:
        len(th.Dataset.range(5).filter(bool))
    assert isinstance(info.value, errors.RandomAccessError)


def test_arguments_of_the_wrong_type_are_type_errors() -> None:
    for make in (lambda: th.Dataset.range(3).prefetch("2"), lambda: th.Dataset.range(3).map(3),
                 lambda: th.Dataset.range(3).slice("a"), lambda: th.Dataset.range(3).shard(2),
                 lambda: th.Dataset.source(iter([1])), lambda: th.Dataset.range(3).repeat(2, reseed_each_epoch=1)):
        with pytest.raises(TypeError) as info:
            make()
        assert isinstance(info.value, errors.ConfigError)
