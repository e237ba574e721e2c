"""Dataset: tf.data/Grain-style chains, compiled onto the DataLoader engine.

A Dataset is an immutable chain of steps. Nothing runs until it is iterated,
measured or indexed; then the chain is optimised (see ``optimize``) and compiled
(see ``compile``) into the engine's stages: one DataLoader (source, IndexSampler,
operations) for the last stage, random-access views for the stages before it.
Every guarantee of the engine holds: the stream is a pure function of position,
the same for every worker count, with a small state and exact, O(1) resume.

Example:
    >>> import thresher as th
    >>> ds = (th.Dataset.range(10)
    ...       .shuffle(seed=0)
    ...       .map(lambda x: x * 10)
    ...       .batch(4))
    >>> len(ds), ds[0].shape
    (3, (4,))
    >>> [b.tolist() for b in ds] == [ds[i].tolist() for i in range(len(ds))]
    True
    >>> ds.filter(lambda b: True)[0]  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    thresher.errors.RandomAccessError: ds[i] is not available: filter at step 4 made this dataset iterable-only ...
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from functools import cached_property
from typing import Any

import numpy as np

from thresher._validate import check_count, is_int, is_seconds, user_path
from thresher.dataset import nodes as N
from thresher.dataset.compile import Compiled, compile_chain
from thresher.dataset.iterator import DatasetIterator, PackIterator
from thresher.dataset.mix import MixSchedule
from thresher.dataset.optimize import explain_text, optimize
from thresher.dataset.padding import _check_pad_to
from thresher.dataset.rebatch_iterator import RebatchIterator
from thresher.dataset.views import StageView
from thresher.errors import ConfigError, ConfigTypeError, RandomAccessError
from thresher.loader.data_loader import DataLoader
from thresher.loader.options import DEFAULT_WORKER_TIMEOUT_S, LoaderOptions, WorkerMode
from thresher.randomness.seeds import check_seed
from thresher.samplers.block_shuffle import BlockShuffle
from thresher.samplers.sharding import ShardOptions
from thresher.sources.in_memory import InMemoryDataSource
from thresher.sources.range import RangeDataSource
from thresher.transforms import Batch
from thresher.transforms.operations import transform_function

__all__ = ["Dataset"]


def _positive_int(value: Any, what: str, minimum: int = 1) -> int:
    return check_count(value, what, minimum=minimum, type_error=ConfigTypeError)


def _callable(fn: Any, what: str) -> None:
    if not callable(fn):
        raise ConfigTypeError(f"{what} takes a function, got {fn!r}")


class Dataset:
    """A chain of steps over a random-access source; iterate it, index it, or compile it.

    Build one with :meth:`source`, :meth:`range`, :meth:`mix` or :meth:`interleave`,
    then chain steps. Each step returns a new Dataset.

    Random access: ``len(ds)`` and ``ds[i]`` work (``ds[i]`` is the i-th element or
    batch of this process's stream, exactly what iteration yields) until a
    ``filter`` or ``pack`` makes the number of elements data-dependent; the
    dataset is then iterable-only and ``len``/``ds[i]`` raise RandomAccessError
    naming that step. An endless dataset (``repeat()``) has ``ds[i]`` but no ``len``.
    """

    def __init__(self, nodes: tuple[N.Node, ...], *, optimize: bool = True) -> None:
        self._nodes = nodes
        self._optimize = optimize

    # -- sources --------------------------------------------------------------------------
    @staticmethod
    def source(source: Any) -> Dataset:
        """A dataset over a random-access source (``__len__`` and ``__getitem__``).

        A list, tuple or NumPy array is wrapped in an InMemoryDataSource.

        Example:
            >>> import thresher as th
            >>> list(th.Dataset.source(["a", "b"]))
            ['a', 'b']
        """
        if isinstance(source, (list, tuple, np.ndarray)):
            source = InMemoryDataSource(source)  # type: ignore[arg-type]
        if not (hasattr(source, "__len__") and hasattr(source, "__getitem__")):
            raise ConfigTypeError(f"Dataset.source needs a random-access source (__len__, __getitem__); got {source!r}")
        return Dataset((N.Source(at=0, source=source),))

    @staticmethod
    def range(start: int, stop: int | None = None, step: int = 1) -> Dataset:
        """The integers of ``range(start, stop, step)`` (``range(n)`` with one argument).

        Example:
            >>> import thresher as th
            >>> list(th.Dataset.range(2, 8, 3))
            [2, 5]
        """
        if stop is None:
            start, stop = 0, start
        return Dataset.source(RangeDataSource(start, stop, step))

    @staticmethod
    def mix(datasets: Sequence[Dataset], weights: Sequence[float] | None = None, *, period: int = 1000,
            seed: int | None = None) -> Dataset:
        """Deterministic weighted mixing (see ``thresher.dataset.mix``).

        Each component keeps its own shuffle and epochs; position g of the mixture
        takes component j with the share ``weights[j]`` (exact over every ``period``
        positions, evenly spread; permuted per period when ``seed`` is given). The
        mixture ends when a component runs out (make them endless with
        ``repeat()`` to mix forever). Components must be random access.

        Example:
            >>> import thresher as th
            >>> a, b = th.Dataset.source(["a"] * 9), th.Dataset.source(["b"] * 9)
            >>> "".join(th.Dataset.mix([a, b], [2, 1], period=3))
            'abaabaabaabaab'
        """
        ds = tuple(datasets)
        if not ds or not all(isinstance(d, Dataset) for d in ds):
            raise ConfigError("Dataset.mix takes a non-empty list of Datasets")
        w = tuple(float(x) for x in (weights if weights is not None else [1.0] * len(ds)))
        if len(w) != len(ds):
            raise ConfigError(f"Dataset.mix got {len(ds)} datasets but {len(w)} weights")
        MixSchedule(w, period, seed)  # validates
        return Dataset((N.Mix(at=0, datasets=ds, weights=w, period=period,
                              seed=None if seed is None else check_seed(seed)),))

    @staticmethod
    def interleave(datasets: Iterable[Any], map_fn: Callable[[Any], Dataset] | None = None, *,
                   cycle_length: int, block_length: int = 1) -> Dataset:
        """Interleaves datasets (e.g. one per file) in a deterministic cycle.

        ``datasets`` is a list of Datasets, or of anything ``map_fn`` turns into
        one (``Dataset.interleave(files, lambda f: Dataset.source(...), ...)``).
        See ``thresher.dataset.interleave`` for the exact order. The result is
        random access; with workers, its chunks are read in parallel.

        Example:
            >>> import thresher as th
            >>> parts = [th.Dataset.range(0, 3), th.Dataset.range(10, 12), th.Dataset.range(20, 24)]
            >>> list(th.Dataset.interleave(parts, cycle_length=2))
            [0, 10, 1, 11, 2, 20, 21, 22, 23]
        """
        items = list(datasets)
        ds = tuple(map_fn(x) for x in items) if map_fn is not None else tuple(items)
        if not all(isinstance(d, Dataset) for d in ds):
            raise ConfigError("Dataset.interleave takes Datasets (or a map_fn that makes them)")
        _positive_int(cycle_length, "interleave cycle_length")
        _positive_int(block_length, "interleave block_length")
        return Dataset((N.Interleave(at=0, datasets=ds, cycle_length=int(cycle_length),
                                     block_length=int(block_length)),))

    # -- steps ------------------------------------------------------------------------------
    def _then(self, make: Callable[[int], N.Node]) -> Dataset:
        return Dataset((*self._nodes, make(len(self._nodes))), optimize=self._optimize)

    def shuffle(self, seed: int, *, block: BlockShuffle | None = None) -> Dataset:
        """A global shuffle: a keyed bijection of positions (O(1) memory), new every epoch.

        Only maps and filters may come before it in a stage (they commute with it);
        after a random map, a batch or a repeat it shuffles the elements of what
        came before (a new stage).

        ``block``: a :class:`thresher.BlockShuffle` shuffles blocks of consecutive
        elements, then elements within windows of blocks, so that a reader fetches each
        chunk of a bucket once per epoch (see the block-shuffle guide). For the source's
        own chunks (ArrayRecord chunks, Parquet row groups, tar shards, a prepared or TFDS
        split's shards) pass ``th.BlockShuffle.of_source(source)`` and shuffle right after
        the source. Exact resume and the same elements for every worker count hold as for
        the full shuffle.

        Example:
            >>> import thresher as th
            >>> sorted(th.Dataset.range(5).shuffle(seed=7))
            [0, 1, 2, 3, 4]
            >>> ds = th.Dataset.range(16).shuffle(seed=7, block=th.BlockShuffle(block_size=4, window_blocks=2))
            >>> first = list(ds)[:8]
            >>> sorted(first), sorted({x // 4 for x in first})   # a window: two whole blocks of 4 elements
            ([0, 1, 2, 3, 4, 5, 6, 7], [0, 1])
        """
        s = check_seed(seed, "shuffle seed")
        if block is not None and not isinstance(block, BlockShuffle):
            raise ConfigTypeError(f"shuffle block must be a thresher.BlockShuffle (or None for a full shuffle), "
                                  f"got {block!r}")
        return self._then(lambda at: N.Shuffle(at=at, seed=s, block=block))

    def repeat(self, num_epochs: int | None = None, *, reseed_each_epoch: bool = True) -> Dataset:
        """Repeats ``num_epochs`` times (None: forever). Put it before ``batch``.

        With ``reseed_each_epoch=True`` (the default, as in Grain) every epoch is a
        new draw of everything before the repeat: shuffles are reshuffled and random
        maps draw anew, also before a shuffle or a slice. Epoch e's draws are a pure
        function of the position in the repeated stream, so they are the same for
        every worker count and after a restart. ``reseed_each_epoch=False`` repeats
        the first epoch exactly: the same order and the same draws every epoch.
        An empty dataset repeated (even forever) is empty.

        Example:
            >>> import thresher as th
            >>> ds = th.Dataset.range(3).random_map(lambda x, rng: int(rng.integers(1000)), seed=1)
            >>> first, second = list(ds.shuffle(seed=2).repeat(2))[:3], list(ds.shuffle(seed=2).repeat(2))[3:]
            >>> sorted(first) != sorted(second)
            True
            >>> same = list(ds.shuffle(seed=2).repeat(2, reseed_each_epoch=False))
            >>> same[:3] == same[3:]
            True
        """
        n = None if num_epochs is None else _positive_int(num_epochs, "repeat num_epochs")
        if not isinstance(reseed_each_epoch, bool):
            raise ConfigTypeError(f"repeat reseed_each_epoch must be a bool, got {reseed_each_epoch!r}")
        return self._then(lambda at: N.Repeat(at=at, num_epochs=n, reseed_each_epoch=reseed_each_epoch))

    def map(self, fn: Callable[[Any], Any], *, batchable: bool = False) -> Dataset:
        """Applies ``fn`` to every element (to every batch after ``batch``).

        ``batchable=True`` promises that ``fn`` on a stacked batch equals ``fn`` on
        each element, stacked; the optimiser may then run it once per batch.

        Example:
            >>> import thresher as th
            >>> [b.tolist() for b in th.Dataset.range(4).map(lambda x: x * 10, batchable=True).batch(2)]
            [[0, 10], [20, 30]]
        """
        fn = transform_function(fn, "map", "Dataset.map")  # a transform object too
        return self._then(lambda at: N.Map(at=at, fns=(fn,), batchable=bool(batchable)))

    def random_map(self, fn: Callable[[Any, np.random.Generator], Any], *, seed: int | None = None) -> Dataset:
        """``fn(element, rng)`` with a generator seeded from (seed, step, position):
        the same draw for the same position, whatever the worker count or restart.

        Example:
            >>> import thresher as th
            >>> ds = th.Dataset.range(3).random_map(lambda x, rng: x + rng.random(), seed=1)
            >>> list(ds) == list(ds)
            True
        """
        fn = transform_function(fn, "random_map", "Dataset.random_map")  # a transform object too
        s = None if seed is None else check_seed(seed, "random_map seed")
        return self._then(lambda at: N.RandomMap(at=at, fn=fn, seed=s))

    def filter(self, predicate: Callable[[Any], Any]) -> Dataset:
        """Keeps the elements for which ``predicate`` is true (makes the dataset iterable-only).

        Example:
            >>> import thresher as th
            >>> list(th.Dataset.range(6).filter(lambda x: x % 2))
            [1, 3, 5]
        """
        predicate = transform_function(predicate, "filter", "Dataset.filter")  # a transform object too
        return self._then(lambda at: N.Filter(at=at, fns=(predicate,)))

    def batch(self, batch_size: int, *, drop_remainder: bool = False, pad_to: Any = None,
              padding_value: Any = 0) -> Dataset:
        """Stacks consecutive elements into batches (pytrees of NumPy arrays).

        ``pad_to`` (``"max"``, an int for the first axis, or a tuple per axis) pads
        variable-shaped array leaves with ``padding_value`` first.

        Example:
            >>> import numpy as np, thresher as th
            >>> ds = th.Dataset.source([np.ones(1), np.ones(3)]).batch(2, pad_to="max")
            >>> ds[0].tolist()
            [[1.0, 0.0, 0.0], [1.0, 1.0, 1.0]]
        """
        Batch(batch_size, drop_remainder)  # validates
        if pad_to is not None:
            _check_pad_to(pad_to)
        return self._then(lambda at: N.BatchNode(at=at, batch_size=int(batch_size), drop_remainder=bool(drop_remainder),
                                                 pad_to=pad_to, padding_value=padding_value))

    def pipe(self, func: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """``func(self, *args, **kwargs)``: a step written as a function, kept in the chain (Grain's ``pipe``).

        Example:
            >>> import thresher as th
            >>> def augment(ds, k):
            ...     return ds.map(lambda x: x + k)
            >>> list(th.Dataset.range(3).pipe(augment, 10))
            [10, 11, 12]
        """
        _callable(func, "pipe")
        return func(self, *args, **kwargs)

    def map_batch(self, fn: Callable[[Any], Any]) -> Dataset:
        """Applies a vectorised ``fn`` to every batch (after ``batch``).

        Example:
            >>> import thresher as th
            >>> [b.tolist() for b in th.Dataset.range(4).batch(2).map_batch(lambda b: b * 2)]
            [[0, 2], [4, 6]]
        """
        _callable(fn, "map_batch")
        return self._then(lambda at: N.MapBatch(at=at, fns=(fn,)))

    def slice(self, start: int | None = None, stop: int | None = None, step: int | None = None) -> Dataset:
        """Elements ``start:stop:step`` (like ``ds[start:stop:step]``); needs random access.

        Example:
            >>> import thresher as th
            >>> list(th.Dataset.range(10).slice(1, 8, 3)), list(th.Dataset.range(10)[::4])
            ([1, 4, 7], [0, 4, 8])
        """
        if step == 0:
            raise ConfigError("slice step must not be 0")
        for v in (start, stop, step):
            if v is not None and not is_int(v):
                raise ConfigTypeError(f"slice bounds must be ints or None, got {v!r}")
        return self._then(lambda at: N.Slice(at=at, start=start, stop=stop, step=step))

    def shard(self, options: ShardOptions) -> Dataset:
        """This process's shard of the stream (docs/architecture.md: blocks of the global stream
        dealt to shards). It applies to the whole pipeline wherever it is written.

        Example:
            >>> import thresher as th
            >>> [list(th.Dataset.range(6).shard(th.ShardOptions(i, 2))) for i in range(2)]
            [[0, 2, 4], [1, 3, 5]]
        """
        options = ShardOptions.coerce(options, "Dataset.shard")  # Grain's too
        return self._then(lambda at: N.Shard(at=at, options=options))

    def prefetch(self, worker_count: int = 0, buffer: int = 2, worker_mode: WorkerMode = "process",
                 worker_timeout_s: float | None = DEFAULT_WORKER_TIMEOUT_S, warm_start: bool = False) -> Dataset:
        """Computes ahead in ``worker_count`` processes (``worker_mode="thread"``: threads),
        ``buffer`` chunks each. It changes speed only, never the elements; it applies to
        the whole pipeline (a mix or interleave component's own prefetch is ignored).
        ``worker_timeout_s`` is the watchdog's limit and ``warm_start`` (opt-in: first
        chunks computed in this process while the worker processes start, giving up their
        isolation) is as in ``DataLoader``; by default every element is computed in a
        worker, and the fork server starts now, in the background.

        Example:
            >>> import thresher as th
            >>> th.Dataset.range(3).prefetch(worker_count=0).nodes[-1].describe()
            'prefetch(worker_count=0, buffer=2)'
            >>> list(th.Dataset.range(5).map(abs).prefetch(worker_count=2, worker_mode="thread"))
            [0, 1, 2, 3, 4]
        """
        w = _positive_int(worker_count, "prefetch worker_count", 0)
        b = _positive_int(buffer, "prefetch buffer")
        options = LoaderOptions(w, worker_buffer_size=b, worker_mode=worker_mode,
                                worker_timeout_s=worker_timeout_s)  # checked
        if not isinstance(warm_start, bool):
            raise ConfigError(f"prefetch warm_start must be True or False, got {warm_start!r}")
        options = replace(options, warm_start=warm_start)
        if w and options.worker_mode == "process":
            from thresher.loader.warm_start import start_early

            start_early()  # the fork server, while the model is built: the first iterator's workers then start fast
        return self._then(lambda at: N.Prefetch(at=at, options=options))

    def cache(self, path: str | os.PathLike[str] | None = None, *, max_bytes: int | None = None,
              serializer: Any = None, timeout_s: float = 3600.0,
              storage_options: Mapping[str, Any] | None = None) -> Dataset:
        """Caches the elements so far: in memory (per process), or in ArrayRecord files at
        ``path`` (built once, atomically, and once for a whole JAX pod). See
        ``thresher.dataset.cache`` and ``thresher.dataset.cache_files``.

        On disk, elements are stored without pickle by default: NumPy arrays and scalars,
        str, bytes, numbers and dicts/lists/tuples of them (``cache_codec.PLAIN``). Pass
        ``serializer=pickle`` (anything with ``dumps``/``loads``) to store other objects,
        only for files you trust: unpickling a file written by someone else runs their
        code. ``timeout_s``: how long the processes of a pod wait for each other's parts.

        ``path`` may be a URL (``s3://bucket/caches/train.array_record``, any fsspec URL):
        the files are built locally, uploaded whole, and the cache is committed by its
        JSON sidecar, uploaded last; ``storage_options`` go to fsspec (credentials,
        endpoint). Reading it back fetches records by byte ranges.

        Example:
            >>> import thresher as th
            >>> ds = th.Dataset.range(4).map(lambda x: x ** 2).cache().shuffle(seed=0).repeat(2)
            >>> sorted(ds)
            [0, 0, 1, 1, 4, 4, 9, 9]
        """
        if max_bytes is not None:
            _positive_int(max_bytes, "cache max_bytes", 0)
        if serializer is not None and not (hasattr(serializer, "dumps") and hasattr(serializer, "loads")):
            raise ConfigError("cache serializer needs dumps() and loads() (like the pickle module)")
        if not is_seconds(timeout_s):
            raise ConfigError(f"cache timeout_s must be a number of seconds > 0, got {timeout_s!r}")
        p = None if path is None else user_path(path)
        so = dict(storage_options) if storage_options is not None else None
        return self._then(lambda at: N.Cache(at=at, path=p, max_bytes=max_bytes, serializer=serializer,
                                             timeout_s=float(timeout_s), storage_options=so))

    def pack(self, seq_len: int, *, window: int = 256, truncate: bool = False) -> Dataset:
        """Packs token records into rows of ``seq_len`` with ``segment_ids`` and
        ``positions`` (see ``thresher.dataset.packing``); makes the dataset iterable-only.

        ``window``: positions packed together; larger packs tighter, and restoring
        re-packs at most one window.

        Example:
            >>> import numpy as np, thresher as th
            >>> docs = th.Dataset.source([np.arange(1, 4), np.arange(1, 3), np.arange(1, 5)])
            >>> [row["tokens"].tolist() for row in docs.pack(5)]
            [[1, 2, 3, 1, 2], [1, 2, 3, 4, 0]]
        """
        n = _positive_int(seq_len, "pack seq_len")
        w = _positive_int(window, "pack window")
        return self._then(lambda at: N.Pack(at=at, seq_len=n, window=w, truncate=bool(truncate)))

    def with_options(self, *, optimize: bool = True) -> Dataset:
        """The same chain with static optimisation on or off (the output is the same).

        Example:
            >>> import thresher as th
            >>> ds = th.Dataset.range(4).map(abs).map(abs)
            >>> len(ds.optimized_nodes()), len(ds.with_options(optimize=False).optimized_nodes())
            (2, 3)
        """
        return Dataset(self._nodes, optimize=optimize)

    def with_mix_weights(self, weights: Sequence[float]) -> Dataset:
        """The same chain with the mixture's weights replaced (a mixture must start it)."""
        first = self._nodes[0]
        if not isinstance(first, N.Mix):
            raise ConfigError("with_mix_weights: this dataset does not start with Dataset.mix")
        return Dataset((replace(first, weights=tuple(float(w) for w in weights)), *self._nodes[1:]),
                       optimize=self._optimize)

    # -- identity -------------------------------------------------------------------------
    @property
    def nodes(self) -> tuple[N.Node, ...]:
        """The chain as written."""
        return self._nodes

    def optimized_nodes(self) -> tuple[N.Node, ...]:
        """The chain after static optimisation (as written when optimisation is off)."""
        return self._optimized[0] if self._optimize else self._nodes

    @cached_property
    def _optimized(self) -> tuple[tuple[N.Node, ...], list[str]]:
        return optimize(self._nodes)

    def prefix_digest(self, stop: int) -> str:
        """The fingerprint of the chain's first ``stop`` steps, as written."""
        text = json.dumps(N.describe_chain(self._nodes[:stop], for_fingerprint=True))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def fingerprint(self) -> str:
        """A digest of what defines the stream (the chain as written, without shard
        and prefetch); it is the state's ``stream['operations']``."""
        return self._compiled.loader.chain_digest

    # -- compiling ------------------------------------------------------------------------
    def compile(self, *, mix_segment: tuple[int, list[int]] | None = None) -> Compiled:
        """Optimises and compiles the chain onto the engine (cached)."""
        if mix_segment is None:
            return self._compiled
        return compile_chain(self.optimized_nodes(), chain_digest=self.prefix_digest(len(self._nodes)),
                             prefix_digest=self.prefix_digest, mix_segment=mix_segment)

    @cached_property
    def _compiled(self) -> Compiled:
        return compile_chain(self.optimized_nodes(), chain_digest=self.prefix_digest(len(self._nodes)),
                             prefix_digest=self.prefix_digest)

    def to_data_loader(self) -> DataLoader:
        """The engine DataLoader this dataset compiles to (not for packed datasets)."""
        c = self._compiled
        if c.front is not None:
            raise ConfigError("a packed dataset is the engine's stream of windows plus a flattening step; "
                              "iterate the Dataset itself")
        if c.rebatch is not None:
            raise ConfigError("batches of a filtered stream's batches are formed after the engine; "
                              "iterate the Dataset itself")
        return c.loader

    def explanation(self) -> str:
        """The text ``explain()`` prints."""
        _, notes = self._optimized
        return explain_text(self._nodes, self.optimized_nodes(), notes if self._optimize else [],
                            self._compiled.stages, self._optimize)

    def explain(self) -> None:
        """Prints the chain as written, after optimisation, and the engine stages it runs as.

        Example:
            >>> import thresher as th
            >>> th.Dataset.range(4).map(abs).map(float).explain()
            as written:
              [0] source(RangeDataSource, len=4)
              [1] map(abs)
              [2] map(float)
            optimised:
              [0] source(RangeDataSource, len=4)
              [1] map(abs)+map(float)
              - fused map at step 2 into the map at step 1
            engine:
              stage 0: RangeDataSource(0, 4, 1) -> map(abs)+map(float)
        """
        print(self.explanation())

    # -- iteration and random access ------------------------------------------------------------
    def __iter__(self) -> DatasetIterator:
        c = self._compiled
        if c.rebatch is not None:
            return RebatchIterator(self, c)
        return PackIterator(self, c) if c.front is not None else DatasetIterator(self, c)

    def _no_random_access(self, what: str) -> None:
        c = self._compiled
        if c.lost is not None:
            raise RandomAccessError(f"{what} is not available: {c.lost} made this dataset iterable-only "
                                    "(iterate it instead)")

    def __len__(self) -> int:
        self._no_random_access("len()")
        c = self._compiled
        if c.endless:
            raise RandomAccessError("len() is not available: this dataset repeats forever (repeat())")
        return len(c.loader)

    @cached_property
    def _view(self) -> StageView:
        return StageView(self._compiled.loader.engine.processor, "this dataset")

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return self.slice(index.start, index.stop, index.step)
        if not is_int(index):
            raise TypeError(f"Dataset indices are ints or slices, got {index!r}")
        self._no_random_access("ds[i]")
        i = int(index)
        if i < 0:
            i += len(self)
        return self._view[i]

    def __repr__(self) -> str:
        return "Dataset(" + " -> ".join(N.describe_chain(self._nodes)) + ")"
